"""The reconcile state machine over an in-memory API server (`controller_fakes`): each step
decided from state. The real API server runs the same flows in tests/integration and e2e/."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from controller_fakes import ADMISSION, World, admitted_world, merge, new_job, queued

from queuectl import convert
from queuectl.api import names
from queuectl.api.views import WorkloadView
from queuectl.controller.watch import kube as k
from queuectl.core.results import Preemption
from queuectl.jobs.batch import BatchJob

AFF = "requiredDuringSchedulingIgnoredDuringExecution"


async def test_a_queued_job_gets_an_owned_workload_with_its_priority() -> None:
    w = World()
    w.add(k.JOBS, new_job())
    key = await w.rec.reconcile_job("Job", "ns", "train")
    wl = w.workload()
    assert key == WorkloadView(wl).key
    (ref,) = wl["metadata"]["ownerReferences"]
    assert (ref["kind"], ref["name"], ref["controller"]) == ("Job", "train", True)
    assert wl["spec"]["priority"] == 5 and wl["spec"]["priorityClassName"] == "low"
    assert w.job()["metadata"]["labels"][names.LABEL_WORKLOAD] == wl["metadata"]["name"]
    # reconciling again creates nothing more
    await w.rec.reconcile_job("Job", "ns", "train")
    assert [x for x in w.kube.writes if x[0] == "create"] == [
        ("create", "workloads", wl["metadata"]["name"])
    ]


async def test_admission_writes_status_then_starts_the_job_with_the_flavor() -> None:
    w, _ = await admitted_world()
    assert WorkloadView(w.workload()).holds_quota
    job = w.job()
    assert job["spec"]["suspend"] is False
    terms = job["spec"]["template"]["spec"]["affinity"]["nodeAffinity"][AFF]["nodeSelectorTerms"]
    assert terms == [
        {
            "matchExpressions": [
                {"key": names.LABEL_GPU_PRODUCT, "operator": "In", "values": ["H100"]}
            ]
        }
    ]


async def test_a_stale_admission_is_never_written_twice() -> None:
    w, key = await admitted_world()
    writes = len(w.kube.writes)
    stale = copy.deepcopy(w.workload())
    stale["status"] = {}
    stale["metadata"]["resourceVersion"] = "1"
    w.cache.store(k.WORKLOADS).objects[("ns", stale["metadata"]["name"])] = stale
    assert not await w.decisions().admit(key, ADMISSION)  # 409, re-read: already admitted
    assert WorkloadView(w.workload()).holds_quota
    assert [x for x in w.kube.writes[writes:] if x[0] == "patch/status"] == []


async def test_an_unadmitted_job_unsuspended_by_hand_is_suspended_again() -> None:
    w = World()
    key = await queued(w, new_job(suspend=False))
    await w.rec.reconcile(key)
    assert w.job()["spec"]["suspend"] is True


async def test_preemption_notice_grace_suspend_drain_and_requeue() -> None:
    w, key = await admitted_world()
    w.add(k.JOBS, merge(w.job(), {"status": {"active": 1, "startTime": "t"}}))
    await w.decisions().preempt(
        Preemption(key, "ns/other", "InClusterQueue", "priority", w.now + 60)
    )
    wl = w.workload()
    assert WorkloadView(wl).is_true(names.COND_PREEMPTED)
    assert w.job()["metadata"]["annotations"][names.ANNOTATION_PREEMPTION_DEADLINE] == (
        convert.format_time(w.now + 60)
    )
    assert w.timers == [(w.now + 60, key)]
    assert w.job()["spec"]["suspend"] is False  # keeps running through its grace period

    w.now += 61
    await w.rec.reconcile(key)
    assert WorkloadView(w.workload()).is_true(names.COND_EVICTED)
    assert w.job()["spec"]["suspend"] is True
    assert WorkloadView(w.workload()).holds_quota  # quota held until the pods are gone
    assert w.sched.requeued == []

    await w.rec.reconcile(key)  # pods still there: nothing happens
    assert w.sched.requeued == []
    w.add(k.JOBS, merge(w.job(), {"status": {"active": 0, "startTime": None}}))
    await w.rec.reconcile(key)
    job = w.job()
    assert "affinity" not in job["spec"]["template"]["spec"] or not job["spec"]["template"]["spec"][
        "affinity"
    ]["nodeAffinity"].get(AFF)
    assert names.ANNOTATION_PREEMPTION_DEADLINE not in job["metadata"].get("annotations", {})
    wl = w.workload()
    assert not WorkloadView(wl).holds_quota and WorkloadView(wl).is_true(names.COND_REQUEUED)
    assert wl["status"]["accumulatedPastExecutionTimeSeconds"] >= 61
    assert w.sched.requeued == [key]


async def test_job_completion_marks_the_workload_finished() -> None:
    w, key = await admitted_world()
    w.add(
        k.JOBS, merge(w.job(), {"status": {"conditions": [{"type": "Complete", "status": "True"}]}})
    )
    await w.rec.reconcile(key)
    cond = WorkloadView(w.workload()).condition(names.COND_FINISHED)
    assert cond is not None and cond["reason"] == names.REASON_FINISHED_SUCCEEDED
    assert key not in w.feed.fed


@pytest.mark.parametrize(
    ("stop", "reason"), [("Hold", names.REASON_LOCAL_QUEUE_STOPPED), ("None", None)]
)
async def test_withheld_reasons_for_a_stopped_local_queue(stop: str, reason: str | None) -> None:
    w = World()
    lq = w.cache.get(k.LOCAL_QUEUES, "lq", "ns")
    w.add(k.LOCAL_QUEUES, merge(copy.deepcopy(dict(lq or {})), {"spec": {"stopPolicy": stop}}))
    key = await queued(w, new_job())
    await w.rec.reconcile(key)
    cond = WorkloadView(w.workload()).condition(names.COND_QUOTA_RESERVED)
    assert (cond or {}).get("reason") == reason


@pytest.mark.parametrize(
    "owners",
    [
        pytest.param([], id="made by hand, no owner"),
        pytest.param(
            [
                {
                    "apiVersion": "batch/v1",
                    "kind": "Job",
                    "name": "train",
                    "uid": "uid-older-train",
                    "controller": True,
                }
            ],
            id="owned by another Job of the same name",
        ),
        pytest.param(
            [{"apiVersion": "batch/v1", "kind": "Job", "name": "train", "uid": "uid-train"}],
            id="right uid but not as controller",
        ),
    ],
)
async def test_a_workload_squatting_the_jobs_workload_name_is_not_adopted(
    owners: list[dict[str, Any]],
) -> None:
    """Its admission must not unsuspend the Job, nor its spec stand for the Job's shape."""
    w = World()
    job = w.add(k.JOBS, new_job())
    wl_name = BatchJob().workload_name(job)
    meta: dict[str, Any] = {"name": wl_name, "namespace": "ns", "ownerReferences": owners}
    w.add(
        k.WORKLOADS,
        {
            "metadata": meta,
            "spec": {"queueName": "lq", "podSets": [{"name": "main", "count": 1}]},
            "status": {
                "admission": {"clusterQueue": "cq", "podSetAssignments": []},
                "conditions": [{"type": names.COND_QUOTA_RESERVED, "status": "True"}],
            },
        },
    )
    assert await w.rec.reconcile_job("Job", "ns", "train") is None
    assert w.rec.stats["foreign_workloads"] == 1
    assert names.LABEL_WORKLOAD not in w.job()["metadata"]["labels"]
    assert not w.cache.is_job_admitted("ns", "train")
    assert w.job()["spec"]["suspend"] is True
    assert not [x for x in w.kube.writes if x[0] == "create" and x[1] == "workloads"]

    # Deleting the squatter gives the Job its own Workload, without the Job changing.
    squatter = w.cache.get(k.WORKLOADS, wl_name, "ns")
    assert squatter is not None
    del w.kube.objects[("workloads", "ns", wl_name)]
    w.cache.store(k.WORKLOADS).apply("DELETED", squatter)
    await w.rec.reconcile(f"ns/{wl_name}")
    (own,) = w.cache.store(k.WORKLOADS).values()
    assert own["metadata"]["ownerReferences"][0]["uid"] == job["metadata"]["uid"]
    assert w.job()["metadata"]["labels"][names.LABEL_WORKLOAD] == wl_name
    assert (w.now, f"ns/{wl_name}") in w.timers
