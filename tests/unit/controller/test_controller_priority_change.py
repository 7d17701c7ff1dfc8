"""A Job relabelled with another priority class moves its Workload to that priority."""

from __future__ import annotations

from controller_fakes import World, job_event, new_job, queued

from queuectl.api import names
from queuectl.api.views import WorkloadView
from queuectl.controller.watch import kube as k


async def relabel(w: World, priority_class: str | None) -> None:
    job = new_job()
    job["metadata"]["uid"] = w.cache.get(k.JOBS, "train", "ns")["metadata"]["uid"]  # type: ignore[index]
    labels = job["metadata"]["labels"]
    labels[names.LABEL_WORKLOAD] = w.workload()["metadata"]["name"]
    if priority_class is None:
        del labels[names.LABEL_PRIORITY_CLASS]
    else:
        labels[names.LABEL_PRIORITY_CLASS] = priority_class
    stored = w.kube.put(k.JOBS, job)
    w.cache.store(k.JOBS).apply("MODIFIED", stored)
    await job_event(w)


async def test_a_queued_job_moved_to_a_higher_class_waits_at_that_priority() -> None:
    w = World()
    w.add(k.PRIORITY_CLASSES_OURS, {"metadata": {"name": "urgent"}, "value": 900})
    w.add(k.JOBS, new_job())
    await w.rec.reconcile_job("Job", "ns", "train")
    assert w.workload()["spec"]["priority"] == 5  # class "low"

    await relabel(w, "urgent")
    spec = w.workload()["spec"]
    assert (spec["priorityClassName"], spec["priority"]) == ("urgent", 900)
    key = f"ns/{w.workload()['metadata']['name']}"
    assert w.sched.workloads()[key].priority == 900  # the core queues it at the new priority
    writes = len(w.kube.writes)
    await job_event(w)  # nothing changed: nothing written
    assert len(w.kube.writes) == writes

    await relabel(w, None)  # no class at all: the default priority
    spec = w.workload()["spec"]
    assert spec.get("priorityClassName") is None and spec["priority"] == 0


async def test_a_job_naming_a_missing_class_waits_and_takes_its_value_once_created() -> None:
    """No guess at priority 0: the Workload waits with a reason that says what to do; when the
    class is created, the core queues it at the class's value and the Workload records it."""
    w = World()
    key = await queued(w, new_job(priority_class="urgent"))
    assert "priority" not in w.workload()["spec"]
    w.feed.feed_workload(w.workload())
    await w.rec.reconcile(key)
    assert w.sched.workload(key) is None
    cond = WorkloadView(w.workload()).condition(names.COND_QUOTA_RESERVED) or {}
    assert cond.get("reason") == names.REASON_PRIORITY_CLASS_NOT_FOUND
    assert "WorkloadPriorityClass urgent does not exist; create it" in cond.get("message", "")

    w.add(k.PRIORITY_CLASSES_OURS, {"metadata": {"name": "urgent"}, "value": 900})
    assert w.sched.workloads()[key].priority == 900  # refed: queued at the class's value
    await w.rec.reconcile(key)
    assert w.workload()["spec"]["priority"] == 900
    writes = len(w.kube.writes)
    await job_event(w)  # nothing more to write
    assert len(w.kube.writes) == writes


async def test_relabelling_to_a_missing_class_withholds_a_queued_job() -> None:
    w = World()
    key = await queued(w, new_job())
    w.feed.feed_workload(w.workload())
    assert w.sched.workloads()[key].priority == 5
    await relabel(w, "typo")
    spec = w.workload()["spec"]
    assert spec["priorityClassName"] == "typo" and "priority" not in spec
    w.feed.feed_workload(w.workload())
    assert w.sched.workload(key) is None
    assert w.feed.withheld[key][0] == names.REASON_PRIORITY_CLASS_NOT_FOUND
