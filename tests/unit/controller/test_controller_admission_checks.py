"""Two-phase admission in the controller, over the in-memory API server: quota reserved with
every check Pending, the Job started only once all are Ready, Retry releases and backs off,
Rejected deactivates (docs/design/admission-checks.md). The test plays the check's controller."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from controller_fakes import ADMISSION, World, merge, new_job, queued

from queuectl import convert
from queuectl.api import names
from queuectl.api.views import WorkloadView
from queuectl.controller.admission import checks
from queuectl.controller.admission.status import RETRY_BACKOFF_BASE_S
from queuectl.controller.queues import queues
from queuectl.controller.watch import kube as k

CHECK = "capacity"


def check_object(active: bool | None = True, message: str = "") -> dict[str, Any]:
    obj: dict[str, Any] = {
        "metadata": {"name": CHECK},
        "spec": {"controllerName": "example.com/capacity"},
    }
    if active is not None:
        cond = {"type": "Active", "status": str(active), "reason": "Set", "message": message}
        obj["status"] = {"conditions": [cond]}
    return obj


def gated_world(check: dict[str, Any] | None = None) -> World:
    """The World whose ClusterQueue `cq` lists the check `capacity` (Active unless given)."""
    w = World()
    w.add(k.ADMISSION_CHECKS, check or check_object())
    cq = copy.deepcopy(w.cache.get(k.CLUSTER_QUEUES, "cq"))
    assert cq is not None
    cq["spec"]["admissionChecks"] = [CHECK]
    cq["metadata"]["generation"] = 2
    w.add(k.CLUSTER_QUEUES, cq)
    return w


async def reserved() -> tuple[World, str]:
    w = gated_world()
    key = await queued(w, new_job())
    assert await w.decisions().admit(key, ADMISSION)
    return w, key


def say(w: World, state: str, message: str = "") -> None:
    """Play the check's controller: write its state on the Workload's status."""
    wl = copy.deepcopy(w.workload())
    entry = {"name": CHECK, "state": state, "message": message, "lastTransitionTime": "t"}
    wl["status"]["admissionChecks"] = [entry]
    w.add(k.WORKLOADS, wl)


def condition(w: World, type_: str) -> dict[str, Any]:
    cond = WorkloadView(w.workload()).condition(type_)
    assert cond is not None, type_
    return dict(cond)


async def test_quota_is_reserved_with_every_check_pending_and_the_job_stays_suspended() -> None:
    w, key = await reserved()
    wl = w.workload()
    assert WorkloadView(wl).holds_quota and not WorkloadView(wl).is_admitted
    assert condition(w, names.COND_ADMITTED)["reason"] == names.REASON_WAITING_FOR_CHECKS
    assert [(c["name"], c["state"]) for c in wl["status"]["admissionChecks"]] == [
        (CHECK, "Pending")
    ]
    assert w.job()["spec"]["suspend"] is True
    assert not w.cache.is_job_admitted("ns", "train")  # the webhook keeps it suspended
    assert w.sched.is_admitted(key)  # the core counts the reservation


async def test_all_checks_ready_admits_and_starts_the_job_with_its_placement() -> None:
    w, key = await reserved()
    say(w, "Ready", "capacity is there")
    await w.rec.reconcile(key)
    assert WorkloadView(w.workload()).is_admitted
    assert "capacity: Ready" in condition(w, names.COND_ADMITTED)["message"]
    job = w.job()
    assert job["spec"]["suspend"] is False
    assert job["spec"]["template"]["spec"]["affinity"]["nodeAffinity"]
    assert w.cache.is_job_admitted("ns", "train")


@pytest.mark.parametrize("state", ["Pending", "Bogus"])
async def test_a_check_not_ready_keeps_it_waiting(state: str) -> None:
    w, key = await reserved()
    say(w, state)
    await w.rec.reconcile(key)
    assert not WorkloadView(w.workload()).is_admitted and WorkloadView(w.workload()).holds_quota
    assert w.job()["spec"]["suspend"] is True


async def test_retry_releases_the_reservation_and_backs_off_with_checks_reset() -> None:
    w, key = await reserved()
    say(w, "Retry", "no capacity right now")
    await w.rec.reconcile(key)
    wl = w.workload()
    assert not WorkloadView(wl).holds_quota
    assert condition(w, names.COND_REQUEUED)["reason"] == names.REASON_EVICTED_CHECK_RETRY
    state = wl["status"]["requeueState"]
    assert state["count"] == 1
    assert state["requeueAt"] == convert.format_time(w.now + RETRY_BACKOFF_BASE_S)
    (entry,) = wl["status"]["admissionChecks"]
    assert entry["state"] == "Pending" and "no capacity right now" in entry["message"]
    assert w.sched.requeued == [key] and not w.sched.is_admitted(key)
    core_wl = w.sched.workload(key)
    assert core_wl is not None and core_wl.not_before == w.now + RETRY_BACKOFF_BASE_S


async def test_a_second_retry_backs_off_longer() -> None:
    w, key = await reserved()
    say(w, "Retry")
    await w.rec.reconcile(key)
    assert await w.decisions().admit(key, ADMISSION)  # reserved again after the back-off
    assert checks.states(w.workload()) == {CHECK: "Pending"}
    say(w, "Retry")
    await w.rec.reconcile(key)
    state = w.workload()["status"]["requeueState"]
    assert state["count"] == 2
    assert state["requeueAt"] == convert.format_time(w.now + 2 * RETRY_BACKOFF_BASE_S)


async def test_rejected_deactivates_with_the_checks_message() -> None:
    w, key = await reserved()
    say(w, "Rejected", "region has no H100 offering")
    await w.rec.reconcile(key)
    wl = w.workload()
    assert wl["spec"]["active"] is False and not WorkloadView(wl).holds_quota
    requeued = condition(w, names.COND_REQUEUED)
    assert requeued["status"] == "False"
    assert requeued["reason"] == names.REASON_EVICTED_CHECK_REJECTED
    assert "capacity: region has no H100 offering" in requeued["message"]
    assert checks.states(wl) == {CHECK: "Rejected"}  # kept for describe
    w.sched.run_cycle(w.now)
    info = w.sched.pending_info(key)
    assert info is not None and info.reason == names.REASON_INACTIVE


async def test_retry_after_admission_stops_the_running_job_first() -> None:
    w, key = await reserved()
    say(w, "Ready")
    await w.rec.reconcile(key)
    w.add(k.JOBS, merge(w.job(), {"status": {"active": 1, "startTime": "t"}}))
    say(w, "Retry", "capacity was reclaimed")
    await w.rec.reconcile(key)
    assert w.job()["spec"]["suspend"] is True
    assert WorkloadView(w.workload()).holds_quota  # held until its pods are gone
    w.add(k.JOBS, merge(w.job(), {"status": {"active": 0, "startTime": None}}))
    await w.rec.reconcile(key)
    assert not WorkloadView(w.workload()).holds_quota and w.sched.requeued == [key]


async def test_a_queue_without_checks_still_admits_in_one_step() -> None:
    w = World()
    key = await queued(w, new_job())
    assert await w.decisions().admit(key, ADMISSION)
    wl = w.workload()
    assert WorkloadView(wl).is_admitted and "admissionChecks" not in wl["status"]
    assert w.job()["spec"]["suspend"] is False


@pytest.mark.parametrize(
    ("check", "reason", "says"),
    [
        (None, "AdmissionCheckNotFound", "capacity not found"),
        (check_object(None), "AdmissionCheckInactive", "has not marked it Active"),
        (check_object(False, "no cloud credentials"), "AdmissionCheckInactive", "credentials"),
    ],
)
def test_the_queue_is_inactive_while_its_check_is_missing_or_inactive(
    check: dict[str, Any] | None, reason: str, says: str
) -> None:
    w = gated_world(check or check_object())
    if check is None:
        w.cache.store(k.ADMISSION_CHECKS).apply("DELETED", check_object())
    cq = w.cache.get(k.CLUSTER_QUEUES, "cq")
    assert cq is not None
    status = queues.cluster_queue_status(cq, w.sched.cluster_queue_status("cq"), w.now)
    (active,) = status["conditions"]
    assert (active["status"], active["reason"]) == ("False", reason)
    assert says in active["message"]


def test_the_checks_controller_marking_it_active_is_fed_to_the_core() -> None:
    w = gated_world(check_object(False))
    assert not w.sched.admission_checks()[CHECK].active
    w.add(k.ADMISSION_CHECKS, check_object(True))  # a status-only change
    assert w.sched.admission_checks()[CHECK].active
    qs = w.sched.cluster_queue_status("cq")
    assert qs is not None and qs.active


@pytest.mark.parametrize(
    ("admitted", "expected"),
    [
        (None, 3600.0),  # no Admitted condition at all: timed from the reservation
        ("False", None),  # waiting for checks: the clock has not started
        ("True", 3600.0 + 30),  # admitted 30 s after the reservation: the wait is added
    ],
)
def test_maximum_execution_time_counts_admitted_time_only(
    admitted: str | None, expected: float | None
) -> None:
    conds = [
        {"type": "QuotaReserved", "status": "True", "lastTransitionTime": "2025-01-01T00:00:00Z"}
    ]
    if admitted is not None:
        conds.append(
            {"type": "Admitted", "status": admitted, "lastTransitionTime": "2025-01-01T00:00:30Z"}
        )
    wl = {
        "metadata": {"name": "w", "namespace": "ns"},
        "spec": {"podSets": [], "maximumExecutionTimeSeconds": 3600},
        "status": {
            "admission": convert.admission_to_status(ADMISSION),
            "conditions": conds,
        },
    }
    assert convert.workload(wl, "cq").max_execution_seconds == expected


# --- the built-in check controllers ---------------------------------------------------------
def always_ready_check() -> dict[str, Any]:
    return {"metadata": {"name": CHECK}, "spec": {"controllerName": names.CHECK_ALWAYS_READY}}


async def test_the_built_in_always_ready_check_marks_itself_active_once() -> None:
    w = gated_world(always_ready_check())
    await w.rec.builtin_checks.sync_check(CHECK)
    obj = w.cache.get(k.ADMISSION_CHECKS, CHECK)
    assert obj is not None and WorkloadView(obj).is_true(names.COND_ACTIVE)
    assert w.sched.admission_checks()[CHECK].active  # fed to the core: the queue admits
    writes = len(w.kube.writes)
    await w.rec.builtin_checks.sync_check(CHECK)
    assert len(w.kube.writes) == writes


async def test_a_check_someone_else_owns_is_left_alone() -> None:
    w = gated_world(check_object(None))
    writes = len(w.kube.writes)
    await w.rec.builtin_checks.sync_check(CHECK)
    assert len(w.kube.writes) == writes
    key = await queued(w, new_job())
    assert await w.decisions().admit(key, ADMISSION)
    assert checks.states(w.workload()) == {CHECK: "Pending"}  # nobody of ours decides it


async def test_a_workload_behind_always_ready_is_admitted_right_after_its_reservation() -> None:
    w = gated_world(always_ready_check())
    await w.rec.builtin_checks.sync_check(CHECK)
    key = await queued(w, new_job())
    assert await w.decisions().admit(key, ADMISSION)
    wl = w.workload()
    assert checks.states(wl) == {CHECK: "Ready"} and WorkloadView(wl).is_admitted
    assert w.job()["spec"]["suspend"] is False


async def test_queue_statuses_count_a_reservation_as_reserving_not_admitted() -> None:
    w, _ = await reserved()
    workloads = list(w.cache.store(k.WORKLOADS).values())
    cq = w.cache.get(k.CLUSTER_QUEUES, "cq")
    assert cq is not None
    waiting = queues.waiting_for_checks(workloads)
    assert waiting == {"cq": 1}
    st = queues.cluster_queue_status(cq, w.sched.cluster_queue_status("cq"), w.now, waiting["cq"])
    assert (st["reservingWorkloads"], st["admittedWorkloads"]) == (1, 0)
    lqs = queues.local_queue_statuses(
        w.cache.store(k.LOCAL_QUEUES).values(), workloads, w.feed, {"cq": True}, w.now
    )
    lq = lqs[("ns", "lq")]
    assert (lq["reservingWorkloads"], lq["admittedWorkloads"]) == (1, 0)
