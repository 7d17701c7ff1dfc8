"""Admitted but not running: a gang whose pods never all start, or stop being Ready, gives its
GPUs back after a timeout, is requeued with back-off, and is deactivated at its requeue limit."""

from __future__ import annotations

from typing import Any

import pytest
from controller_fakes import ADMISSION, World, new_job, queued

from queuectl import convert
from queuectl.api import names
from queuectl.api.views import WorkloadView
from queuectl.controller.watch import kube as k
from queuectl.controller.watch.kube import Obj
from queuectl.controller.watch.workload_pods import WorkloadPods
from queuectl.controller.workloads import pods_ready
from queuectl.controller.workloads.pods_ready import PodsReadyOptions, Step

T0 = 1_735_689_600.0
RULES = PodsReadyOptions(timeout_s=600, recovery_s=300, requeue_limit=2)


def workload(
    *, pods: int = 2, ready_cond: tuple[str, str, float] | None = None, requeues: int = 0
) -> Obj:
    """Admitted at T0 with `pods` pods; `ready_cond`: (status, reason, since) of PodsReady."""
    conds: list[dict[str, Any]] = [
        {"type": "Admitted", "status": "True", "lastTransitionTime": convert.format_time(T0)}
    ]
    if ready_cond is not None:
        status, reason, since = ready_cond
        conds.append(
            {
                "type": names.COND_PODS_READY,
                "status": status,
                "reason": reason,
                "lastTransitionTime": convert.format_time(since),
            }
        )
    st: dict[str, Any] = {
        "conditions": conds,
        "admission": {"clusterQueue": "cq", "podSetAssignments": [{"name": "main", "count": pods}]},
    }
    if requeues:
        st["requeueState"] = {"count": requeues}
    return {"metadata": {"name": "w", "namespace": "ns"}, "spec": {}, "status": st}


READY = ("True", names.REASON_PODS_READY, T0 + 30)
LOST = ("False", names.REASON_PODS_NOT_READY, T0 + 900)


@pytest.mark.parametrize(
    ("case", "wl", "ready", "now", "want"),
    [
        ("starting: look again at the deadline", workload(), 1, T0 + 60, Step(check_at=T0 + 600)),
        (
            "all Ready: say so",
            workload(),
            2,
            T0 + 60,
            Step(condition=(True, names.REASON_PODS_READY, "All 2 pods are Ready")),
        ),
        ("all Ready, already said", workload(ready_cond=READY), 2, T0 + 9000, Step()),
        (
            "a Ready pod lost: say so, look again after the recovery timeout",
            workload(ready_cond=READY),
            1,
            T0 + 900,
            Step(
                condition=(False, names.REASON_PODS_NOT_READY, "1 of 2 pods Ready"),
                check_at=T0 + 1200,
            ),
        ),
        ("recovering", workload(ready_cond=LOST), 1, T0 + 1000, Step(check_at=T0 + 1200)),
        (
            "recovered",
            workload(ready_cond=LOST),
            2,
            T0 + 1000,
            Step(condition=(True, names.REASON_PODS_READY, "All 2 pods are Ready")),
        ),
    ],
    ids=lambda v: v if isinstance(v, str) else "",
)
def test_the_step_of_a_running_workload(
    case: str, wl: Obj, ready: int, now: float, want: Step
) -> None:
    assert pods_ready.step(wl, ready, RULES, now) == want


def test_pods_not_all_ready_by_the_startup_deadline_are_evicted_and_requeued() -> None:
    got = pods_ready.step(workload(), 1, RULES, T0 + 600)
    assert got.evict is not None and not got.deactivate
    assert "only 1 of its 2 pods Ready 600 s after admission (startup timeout)" in got.evict
    assert "1 of at most 2 requeues" in got.evict


def test_a_lost_pod_not_back_within_the_recovery_timeout_evicts() -> None:
    got = pods_ready.step(workload(ready_cond=LOST), 1, RULES, T0 + 1200)
    assert got.evict is not None and "recovery timeout" in got.evict


def test_at_the_requeue_limit_it_is_deactivated_with_what_to_do() -> None:
    got = pods_ready.step(workload(requeues=2), 0, RULES, T0 + 600)
    assert got.deactivate and got.evict is not None
    assert "after 2 requeues for PodsReadyTimeout (limit 2)" in got.evict
    assert "spec.active: true" in got.evict


def test_off_means_off() -> None:
    off = PodsReadyOptions(timeout_s=0)
    assert pods_ready.step(workload(), 0, off, T0 + 10**6) == Step()
    no_recovery = PodsReadyOptions(timeout_s=600, recovery_s=0)
    assert pods_ready.step(workload(ready_cond=LOST), 0, no_recovery, T0 + 10**6) == Step()


def test_block_admission_without_timeouts_still_says_when_pods_are_ready() -> None:
    """Its flavors are held until PodsReady=True: it is written (and taken back) with no clock,
    never an eviction."""
    rules = PodsReadyOptions(timeout_s=0, block_admission=True)
    assert pods_ready.step(workload(), 1, rules, T0 + 10**6) == Step()
    assert pods_ready.step(workload(), 2, rules, T0 + 10**6).condition == (
        True,
        names.REASON_PODS_READY,
        "All 2 pods are Ready",
    )
    lost = pods_ready.step(workload(ready_cond=READY), 1, rules, T0 + 10**6)
    assert lost == Step(condition=(False, names.REASON_PODS_NOT_READY, "1 of 2 pods Ready"))
    cq = {"spec": {"waitForPodsReady": {"timeoutSeconds": 0, "blockAdmission": True}}}
    assert pods_ready.policy(PodsReadyOptions(), cq).block_admission is True


def test_a_cluster_queue_overrides_each_default_it_sets() -> None:
    cq = {"spec": {"waitForPodsReady": {"timeoutSeconds": 1800, "requeueLimit": 0}}}
    got = pods_ready.policy(RULES, cq)
    assert (got.timeout_s, got.recovery_s, got.requeue_limit) == (1800, 300, 0)
    assert pods_ready.policy(RULES, None) == RULES


# --- in the reconciler ------------------------------------------------------------------------


def pod(w: World, name: str, *, ready: bool) -> Obj:
    job = w.job()
    ref = {"kind": "Job", "name": "train", "uid": job["metadata"]["uid"], "controller": True}
    return {
        "metadata": {"name": name, "namespace": "ns", "ownerReferences": [ref]},
        "spec": {"nodeName": "n1"},
        "status": {
            "phase": "Running",
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
        },
    }


def update(w: World, obj: Obj) -> None:
    """A pod changed (its watch event)."""
    w.cache.store(k.PODS).apply("MODIFIED", w.kube.put(k.PODS, obj))


def cond(w: World, type_: str) -> dict[str, Any]:
    return WorkloadView(w.workload()).condition(type_) or {}


async def started(rules: PodsReadyOptions = RULES) -> tuple[World, str]:
    w = World(pods_ready=rules)
    key = await queued(w, new_job())
    assert await w.decisions().admit(key, ADMISSION)
    assert w.job()["spec"]["suspend"] is False
    return w, key


async def test_a_job_whose_pod_never_becomes_ready_gives_its_gpus_back_after_the_timeout() -> None:
    """Admitted and started; its pod is bound but never Ready (an image that cannot be
    pulled). At the startup deadline it is evicted with PodsReadyTimeout, its job suspended,
    and once the pod is gone it is requeued with the back-off in requeueState."""
    w, key = await started()
    assert (w.now + 600, key) in w.timers  # the deadline is a timer: no event would come
    w.add(k.PODS, pod(w, "train-0", ready=False))
    w.now += 599
    await w.rec.reconcile(key)
    assert not WorkloadView(w.workload()).is_true(names.COND_EVICTED)

    w.now += 1
    await w.rec.reconcile(key)
    evicted = cond(w, names.COND_EVICTED)
    assert (evicted.get("status"), evicted.get("reason")) == ("True", "PodsReadyTimeout")
    assert w.job()["spec"]["suspend"] is True

    for p in w.cache.store(k.PODS).values():
        w.cache.store(k.PODS).apply("DELETED", p)
    job = w.job()
    job["status"] = {}
    w.cache.store(k.JOBS).apply("MODIFIED", w.kube.put(k.JOBS, job))
    await w.rec.reconcile(key)
    view = WorkloadView(w.workload())
    assert not view.holds_quota
    state = view.status["requeueState"]
    assert state["count"] == 1
    assert convert.parse_time(state["requeueAt"]) == w.now + 60  # the back-off's base
    assert view.condition(names.COND_PODS_READY) is None  # the next admission starts afresh


async def test_a_gang_that_comes_up_is_marked_ready_and_kept() -> None:
    w, key = await started()
    w.add(k.PODS, pod(w, "train-0", ready=False))
    update(w, pod(w, "train-0", ready=True))
    assert (w.now, key) in w.timers  # the pod's readiness woke its Workload
    await w.rec.reconcile(key)
    assert cond(w, names.COND_PODS_READY).get("status") == "True"
    w.now += 10_000
    await w.rec.reconcile(key)
    assert WorkloadView(w.workload()).holds_quota
    assert not WorkloadView(w.workload()).is_true(names.COND_EVICTED)


async def test_a_running_gang_that_loses_a_pod_is_evicted_after_the_recovery_timeout() -> None:
    w, key = await started()
    w.add(k.PODS, pod(w, "train-0", ready=True))
    await w.rec.reconcile(key)
    w.now += 3600
    update(w, pod(w, "train-0", ready=False))  # a crash
    await w.rec.reconcile(key)
    lost = cond(w, names.COND_PODS_READY)
    assert (lost.get("status"), lost.get("reason")) == ("False", names.REASON_PODS_NOT_READY)
    assert (w.now + 300, key) in w.timers
    w.now += 300
    await w.rec.reconcile(key)
    assert cond(w, names.COND_EVICTED).get("reason") == "PodsReadyTimeout"


async def test_at_the_requeue_limit_the_workload_is_deactivated() -> None:
    w, key = await started(PodsReadyOptions(timeout_s=600, requeue_limit=1))
    wl = w.workload()
    wl["status"]["requeueState"] = {"count": 1}
    w.cache.store(k.WORKLOADS).apply("MODIFIED", w.kube.put(k.WORKLOADS, wl))
    w.now += 600
    await w.rec.reconcile(key)
    assert w.workload()["spec"]["active"] is False
    evicted = cond(w, names.COND_EVICTED)
    assert evicted.get("reason") == names.REASON_EVICTED_REQUEUE_LIMIT
    assert "limit 1" in evicted.get("message", "")


async def test_a_cluster_queue_may_turn_the_timeout_off() -> None:
    w = World(pods_ready=RULES)
    cq = w.cache.get(k.CLUSTER_QUEUES, "cq") or {}
    cq["spec"]["waitForPodsReady"] = {"timeoutSeconds": 0}
    w.cache.store(k.CLUSTER_QUEUES).apply("MODIFIED", w.kube.put(k.CLUSTER_QUEUES, cq))
    key = await queued(w, new_job())
    assert await w.decisions().admit(key, ADMISSION)
    w.now += 10**6
    await w.rec.reconcile(key)
    assert WorkloadView(w.workload()).holds_quota


def test_the_index_counts_only_bound_ready_pods_and_wakes_on_changes() -> None:
    w = World()
    woken: list[str] = []
    index = WorkloadPods(w.cache, woken.append)
    w.add(k.JOBS, {**new_job(), "metadata": {**new_job()["metadata"]}})
    job = w.job()
    job["metadata"].setdefault("labels", {})[names.LABEL_WORKLOAD] = "wl"
    w.cache.store(k.JOBS).apply("MODIFIED", w.kube.put(k.JOBS, job))
    w.add(k.PODS, pod(w, "a", ready=False))
    assert index.ready("ns/wl") == 0 and woken == []
    update(w, pod(w, "a", ready=True))
    assert index.ready("ns/wl") == 1 and woken == ["ns/wl"]
    update(w, pod(w, "a", ready=True))  # no change: no wake
    assert woken == ["ns/wl"]
    w.cache.store(k.PODS).apply("DELETED", pod(w, "a", ready=True))
    assert index.ready("ns/wl") == 0 and woken == ["ns/wl", "ns/wl"]


async def test_the_core_is_told_while_a_gang_starts_and_when_it_is_ready() -> None:
    """Block admission reads the core's `starting`: fed from the Workload (holding quota, no
    PodsReady=True), and fed again when PodsReady turns True (a condition-only change)."""
    w, key = await started()
    w.feed.feed_workload(w.workload())
    core_wl = w.sched.workload(key)
    assert core_wl is not None and core_wl.admission is not None and core_wl.starting
    w.add(k.PODS, pod(w, "train-0", ready=False))
    update(w, pod(w, "train-0", ready=True))
    before = w.workload()
    await w.rec.reconcile(key)
    assert cond(w, names.COND_PODS_READY).get("status") == "True"
    w.feed._workload("MODIFIED", w.workload(), before)  # the Workload's watch event
    core_wl = w.sched.workload(key)
    assert core_wl is not None and not core_wl.starting


def test_a_cluster_queue_may_turn_block_admission_on_or_off() -> None:
    def cq(spec: dict[str, Any]) -> Obj:
        return {"metadata": {"name": "cq"}, "spec": {"waitForPodsReady": spec}}

    assert convert.cluster_queue(cq({})).block_admission is None
    assert convert.cluster_queue(cq({"blockAdmission": True})).block_admission is True
    assert convert.cluster_queue(cq({"blockAdmission": False})).block_admission is False
