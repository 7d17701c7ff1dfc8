"""A Job relabelled with another priority class moves its Workload to that priority."""

from __future__ import annotations

from test_controller_reconcile import World, new_job

from queuectl.api import names
from queuectl.controller import kube as k


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
    await w.rec.reconcile_job("Job", "ns", "train")


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
    assert w.sched.st.workloads[key].priority == 900  # the core queues it at the new priority
    writes = len(w.kube.writes)
    await w.rec.reconcile_job("Job", "ns", "train")  # nothing changed: nothing written
    assert len(w.kube.writes) == writes

    await relabel(w, None)  # no class at all: the default priority
    spec = w.workload()["spec"]
    assert spec.get("priorityClassName") is None and spec["priority"] == 0
