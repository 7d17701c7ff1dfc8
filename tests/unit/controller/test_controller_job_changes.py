"""A Job that changes under its Workload (issue 12, findings 1, 3 and 9).

Waiting, the Workload follows it: new shape, new queue, same place in line. Holding quota, a
Workload that no longer describes its Job is never started or kept running: it is evicted and
requeued, then follows. A priority class the namespace may not use gives no priority.
"""

from __future__ import annotations

import copy
from typing import Any

from controller_fakes import ADMISSION, World, admitted_world, job_event, merge, new_job, queued

from queuectl.api import names
from queuectl.api.views import WorkloadView
from queuectl.controller.watch import kube as k

GPU = names.GPU_RESOURCE


def change_job(w: World, **spec: Any) -> None:
    """The user's edit of the Job (the webhook allowed it), as the watch delivers it."""
    job = copy.deepcopy(w.job())
    labels = spec.pop("labels", None)
    if labels:
        job["metadata"]["labels"].update(labels)
    w.add(k.JOBS, merge(job, {"spec": spec}))


async def waiting_world() -> tuple[World, str]:
    w = World()
    w.add(
        k.LOCAL_QUEUES,
        {"metadata": {"name": "lq2", "namespace": "ns"}, "spec": {"clusterQueue": "cq"}},
    )
    job = new_job()
    job["spec"]["completions"] = 8
    job["spec"]["template"]["spec"]["containers"][0]["resources"]["requests"][GPU] = "2"
    key = await queued(w, job)
    await w.rec.reconcile(key)
    return w, key


async def test_a_waiting_job_scaled_up_resizes_its_workload_in_place() -> None:
    w, key = await waiting_world()
    before = w.workload()
    assert w.sched.workloads()[key].podsets[0].count == 1

    change_job(w, parallelism=8)
    await w.rec.reconcile(key)

    after = w.workload()
    (pod_set,) = after["spec"]["podSets"]
    assert pod_set["count"] == 8
    assert after["metadata"]["uid"] == before["metadata"]["uid"]  # same Workload, same place
    core_wl = w.sched.workloads()[key]
    assert (core_wl.podsets[0].count, core_wl.podsets[0].requests) == (8, {GPU: 2})
    writes = len(w.kube.writes)
    await w.rec.reconcile(key)  # it describes the Job now: nothing more to write
    assert [x for x in w.kube.writes[writes:] if x[1] == "workloads" and x[0] == "patch"] == []


async def test_a_waiting_job_given_more_gpus_per_pod_resizes_its_workload() -> None:
    w, key = await waiting_world()
    job = copy.deepcopy(w.job())
    job["spec"]["template"]["spec"]["containers"][0]["resources"]["requests"][GPU] = "4"
    w.add(k.JOBS, job)
    await w.rec.reconcile(key)
    assert w.sched.workloads()[key].podsets[0].requests == {GPU: 4}


async def test_a_waiting_job_relabelled_to_another_queue_moves_its_workload() -> None:
    w, key = await waiting_world()
    change_job(w, labels={names.LABEL_QUEUE_NAME: "lq2"})
    await w.rec.reconcile(key)
    wl = w.workload()
    assert wl["spec"]["queueName"] == "lq2"
    assert wl["metadata"]["labels"][names.LABEL_QUEUE_NAME] == "lq2"


async def test_a_relabel_to_a_missing_queue_moves_the_workload_to_wait_there() -> None:
    w, key = await waiting_world()
    change_job(w, labels={names.LABEL_QUEUE_NAME: "nowhere"})
    await w.rec.reconcile(key)
    assert w.workload()["spec"]["queueName"] == "nowhere"
    assert w.feed.withheld[key][0] == names.REASON_LOCAL_QUEUE_NOT_FOUND
    assert w.sched.workload(key) is None


async def test_an_admission_that_races_a_scale_up_is_never_started() -> None:
    """Admitted for 1 pod while the user scaled to 8 (the webhook's cache had not seen the
    admission yet): the Job stays suspended, the quota is released, the Workload resized."""
    w = World()
    key = await queued(w, new_job())
    change_job(w, parallelism=8)  # lands before the admission is acted on
    assert await w.decisions().admit(key, ADMISSION)

    assert w.job()["spec"]["suspend"] is True, "started with 8 pods on quota for 1"
    cond = WorkloadView(w.workload()).condition(names.COND_REQUEUED)
    assert cond is not None and cond["reason"] == names.REASON_EVICTED_JOB_CHANGED
    assert not WorkloadView(w.workload()).holds_quota
    assert w.sched.workloads()[key].not_before > w.now, "the stale shape could be re-admitted"
    await w.rec.reconcile(key)
    assert w.workload()["spec"]["podSets"][0]["count"] == 8
    core_wl = w.sched.workloads()[key]
    assert (core_wl.podsets[0].count, core_wl.not_before) == (8, 0.0)  # queued as it is now


async def test_a_running_job_scaled_past_the_webhook_is_stopped_and_requeued() -> None:
    w, key = await admitted_world()
    w.add(k.JOBS, merge(w.job(), {"status": {"active": 1, "startTime": "t"}}))
    change_job(w, parallelism=4)
    await w.rec.reconcile(key)
    evicted = WorkloadView(w.workload()).condition(names.COND_EVICTED) or {}
    assert evicted.get("reason") == names.REASON_EVICTED_JOB_CHANGED
    assert "main: 1 x {nvidia.com/gpu=8}] -> [main: 4 x {nvidia.com/gpu=8}]" in evicted["message"]
    assert w.job()["spec"]["suspend"] is True
    assert WorkloadView(w.workload()).holds_quota  # until its pods are gone

    w.add(k.JOBS, merge(w.job(), {"status": {"active": 0, "startTime": None}}))
    await w.rec.reconcile(key)
    await w.rec.reconcile(key)
    wl = w.workload()
    assert not WorkloadView(wl).holds_quota
    assert wl["spec"]["podSets"][0]["count"] == 4


async def test_an_admitted_job_keeps_running_when_only_labels_change() -> None:
    w, key = await admitted_world()
    change_job(w, labels={"app": "v2"})
    await w.rec.reconcile(key)
    assert WorkloadView(w.workload()).holds_quota
    assert not WorkloadView(w.workload()).is_true(names.COND_EVICTED)
    assert w.job()["spec"]["suspend"] is False


# --- priority classes a namespace may not use -------------------------------------------
def restricted(w: World, name: str = "top", value: int = 1000) -> None:
    selector: dict[str, Any] = {"matchLabels": {"kubernetes.io/metadata.name": "elsewhere"}}
    w.add(
        k.PRIORITY_CLASSES_OURS,
        {"metadata": {"name": name}, "value": value, "namespaceSelector": selector},
    )


async def test_a_job_naming_a_class_its_namespace_may_not_use_waits_without_priority() -> None:
    w = World()
    restricted(w)
    key = await queued(w, new_job(priority_class="top"))
    assert "priority" not in w.workload()["spec"]
    await w.rec.reconcile(key)
    assert w.sched.workload(key) is None
    cond = WorkloadView(w.workload()).condition(names.COND_QUOTA_RESERVED) or {}
    assert cond.get("reason") == names.REASON_PRIORITY_CLASS_NOT_ALLOWED
    assert "WorkloadPriorityClass top may not be used in namespace ns" in cond["message"]

    # The admin lets the namespace use it: it is queued at the class's value.
    w.add(
        k.PRIORITY_CLASSES_OURS,
        {"metadata": {"name": "top", "generation": 2}, "value": 1000, "namespaceSelector": {}},
    )
    assert w.sched.workloads()[key].priority == 1000


async def test_a_running_job_relabelled_past_the_webhook_gains_no_priority() -> None:
    w, key = await admitted_world()
    restricted(w)
    change_job(w, labels={names.LABEL_PRIORITY_CLASS: "top"})
    await job_event(w)
    assert w.workload()["spec"]["priorityClassName"] == "top"
    assert w.sched.workloads()[key].priority == 0  # not 1000
    assert WorkloadView(w.workload()).holds_quota


async def test_a_running_job_moved_to_another_flavors_nodes_past_the_webhook_is_stopped() -> None:
    """Admitted on the H100 flavor and started (its node affinity injected); with the webhook
    down the user adds a toleration and a nodeSelector for other nodes. The shape is the same,
    the placement is not what was admitted: evicted as any other change."""
    w, key = await admitted_world()
    started = merge(w.job(), {"status": {"active": 1, "startTime": "t"}})
    assert started["spec"]["suspend"] is False  # placed and started by the controller
    w.add(k.JOBS, started)
    await w.rec.reconcile(key)
    assert not WorkloadView(w.workload()).is_true(names.COND_EVICTED), (
        "its own placement is no change"
    )

    moved = copy.deepcopy(w.job())
    moved["spec"]["template"]["spec"]["nodeSelector"] = {names.LABEL_GPU_PRODUCT: "A100"}
    w.add(k.JOBS, moved)
    await w.rec.reconcile(key)
    evicted = WorkloadView(w.workload()).condition(names.COND_EVICTED) or {}
    assert evicted.get("reason") == names.REASON_EVICTED_JOB_CHANGED
    assert "pod set 'main': nodeSelector not as admitted" in evicted["message"]
    assert w.job()["spec"]["suspend"] is True
