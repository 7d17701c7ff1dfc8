"""Issue 4 e2e, scenarios 3 and 4: preemption with a notice and a grace period.

A victim gets condition Preempted, the annotation queuectl.io/preemption-deadline on its Job
and on its running pods, and an Event; its pods keep running until the deadline; then its Job
is suspended, its pods go, its quota is released, it waits again (requeued) and the preemptor
runs.
"""

from __future__ import annotations

import time

from e2e.harness import (
    ControllerProcess,
    admitted,
    apply,
    cluster_queue,
    condition,
    flavor,
    get,
    gpu_job,
    is_true,
    items,
    local_queue,
    low_and_high,
    running_pods,
    wait_for,
    wait_for_pending_reason,
    workload_of,
)
from queuectl.api import names
from queuectl.convert import parse_time
from queuectl.testenv.cluster import Cluster
from queuectl.testenv.nodes import H100
from queuectl.testenv.pytest_plugin import StandardFleet

GRACE = 6


def preempted_jobs(cluster: Cluster, namespace: str, jobs: list[str]) -> list[str]:
    return [j for j in jobs if is_true(workload_of(cluster, namespace, j), names.COND_PREEMPTED)]


def check_graceful_stop(cluster: Cluster, namespace: str, victim: str) -> None:
    """The notice, running through the grace period, then suspended, pods gone, requeued."""
    job = get(cluster, "job", victim, namespace)
    deadline_text = job["metadata"]["annotations"][names.ANNOTATION_PREEMPTION_DEADLINE]
    deadline = parse_time(deadline_text)
    wl = workload_of(cluster, namespace, victim)
    assert wl is not None and wl["status"]["preemption"]["deadline"] == deadline_text
    # The deadline is the grace period after the preemption (1 s of timestamp granularity),
    # judged from the Workload's own times, not from when this test looked.
    preempted = parse_time((condition(wl, names.COND_PREEMPTED) or {}).get("lastTransitionTime"))
    assert deadline is not None and preempted is not None
    assert abs(deadline - (preempted + GRACE)) <= 1, (deadline_text, preempted)
    events = items(cluster, "events.events.k8s.io", namespace)
    assert any(e.get("reason") == names.EVENT_PREEMPTED for e in events)
    # still running during the grace period, each pod told the deadline (its containers read
    # it through a downwardAPI volume)
    told = wait_for(
        f"the notice on {victim}'s running pods",
        lambda: [
            p
            for p in running_pods(cluster, namespace, victim)
            if (p["metadata"].get("annotations") or {}).get(names.ANNOTATION_PREEMPTION_DEADLINE)
            == deadline_text
        ],
        timeout=max(1.0, deadline - time.time()),  # told before the deadline
    )
    assert len(told) == len(running_pods(cluster, namespace, victim))
    assert not get(cluster, "job", victim, namespace)["spec"].get("suspend")
    wait_for(
        f"{victim} suspended after its deadline",
        lambda: get(cluster, "job", victim, namespace)["spec"].get("suspend"),
        timeout=GRACE + 30,
    )
    assert time.time() >= deadline - 1  # not before the deadline (1 s of clock granularity)
    requeued = wait_for(
        f"{victim} requeued",
        lambda: (
            (w := workload_of(cluster, namespace, victim)) and is_true(w, names.COND_REQUEUED) and w
        ),
        timeout=60,
    )
    assert not (requeued.get("status") or {}).get("admission")
    assert running_pods(cluster, namespace, victim) == []
    job = get(cluster, "job", victim, namespace)
    assert names.ANNOTATION_PREEMPTION_DEADLINE not in (job["metadata"].get("annotations") or {})
    affinity = job["spec"]["template"]["spec"].get("affinity") or {}
    assert not affinity.get("nodeAffinity", {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution"
    )  # injected constraints removed


def test_3_borrowed_quota_is_reclaimed_with_a_grace_period(
    control_plane: Cluster, namespace: str, gpu_nodes: StandardFleet, controller: ControllerProcess
) -> None:
    cohort, wpc = f"co-{namespace}", f"research-{namespace}"
    team_a, team_b = f"a-{namespace}", f"b-{namespace}"
    apply(
        control_plane,
        flavor("h100", H100),
        {
            "apiVersion": names.API_VERSION,
            "kind": "WorkloadPriorityClass",
            "metadata": {"name": wpc},
            "value": 100,
            "preemptionGracePeriodSeconds": GRACE,
        },
        cluster_queue(team_a, namespace, {"h100": 8}, cohortName=cohort),
        cluster_queue(
            team_b,
            namespace,
            {"h100": 16},
            cohortName=cohort,
            preemption={"reclaimWithinCohort": "Any"},
        ),
        local_queue("lq-a", namespace, team_a),
        local_queue("lq-b", namespace, team_b),
    )
    a_jobs = ["a-0", "a-1", "a-2"]
    apply(control_plane, *(gpu_job(j, namespace, "lq-a", priority=wpc) for j in a_jobs))
    wait_for(
        "team A runs 24 GPUs (16 borrowed from B)",
        lambda: all(admitted(control_plane, namespace, j) for j in a_jobs),
    )
    st = wait_for(
        "A's borrowing reported",
        lambda: (
            (s := get(control_plane, "clusterqueue", team_a).get("status") or {})
            and s.get("flavorsUsage")
            and s["flavorsUsage"][0]["resources"][0]["borrowed"] == 16
            and s
        ),
    )
    assert st["flavorsUsage"][0]["resources"][0]["total"] == 24
    apply(control_plane, gpu_job("b-0", namespace, "lq-b", pods=2))
    victims = wait_for(
        "two of A's jobs noticed",
        lambda: len(v := preempted_jobs(control_plane, namespace, a_jobs)) == 2 and v,
    )
    for victim in victims:
        cond = condition(workload_of(control_plane, namespace, victim) or {}, names.COND_PREEMPTED)
        assert cond is not None and cond["reason"] == names.REASON_PREEMPTED_RECLAIM
    assert not admitted(control_plane, namespace, "b-0")  # B waits while A checkpoints
    check_graceful_stop(control_plane, namespace, victims[0])
    wait_for("B's job admitted", lambda: admitted(control_plane, namespace, "b-0"), timeout=60)
    wait_for(
        "B's pods running",
        lambda: len(running_pods(control_plane, namespace, "b-0")) == 2,
        timeout=60,
    )
    (survivor,) = set(a_jobs) - set(victims)
    assert admitted(control_plane, namespace, survivor)  # A keeps its own nominal quota


def test_4_priority_preemption_in_one_queue_waits_out_the_grace_period(
    control_plane: Cluster, namespace: str, gpu_nodes: StandardFleet, controller: ControllerProcess
) -> None:
    cq = f"cq-{namespace}"
    low, high = low_and_high(control_plane, namespace, grace=GRACE)
    apply(
        control_plane,
        flavor("h100", H100),
        cluster_queue(
            cq, namespace, {"h100": 8}, preemption={"withinClusterQueue": "LowerPriority"}
        ),
        local_queue("lq", namespace, cq),
    )
    apply(control_plane, gpu_job("victim", namespace, "lq", priority=low))
    wait_for("victim running", lambda: running_pods(control_plane, namespace, "victim"))
    apply(control_plane, gpu_job("urgent", namespace, "lq", priority=high))
    wait_for("victim noticed", lambda: preempted_jobs(control_plane, namespace, ["victim"]))
    cond = condition(workload_of(control_plane, namespace, "victim") or {}, names.COND_PREEMPTED)
    assert cond is not None and cond["reason"] == names.REASON_PREEMPTED_WITHIN_CQ
    check_graceful_stop(control_plane, namespace, "victim")
    wait_for("urgent running", lambda: running_pods(control_plane, namespace, "urgent"), timeout=60)
    wl = workload_of(control_plane, namespace, "victim")
    assert wl is not None and wl["spec"]["priority"] == 10


def test_5_a_preemptor_waits_for_finishing_work_instead_of_evicting(
    control_plane: Cluster, namespace: str, gpu_nodes: StandardFleet, controller: ControllerProcess
) -> None:
    """The queue's 16 GPUs run `victim` (until deleted) and `warmup` (1 s). warmup's 8 GPUs
    come back and `filler` (20 s) takes them. Then `urgent` arrives: quota came back just now,
    and victim would take 30 s to stop anyway (its grace period), so urgent waits for
    completions instead of preempting, holding what frees; filler ends and urgent runs, and
    nobody was preempted."""
    cq = f"cq-{namespace}"
    low, high = low_and_high(control_plane, namespace, grace=30)
    apply(
        control_plane,
        flavor("h100", H100),
        cluster_queue(
            cq, namespace, {"h100": 16}, preemption={"withinClusterQueue": "LowerPriority"}
        ),
        local_queue("lq", namespace, cq),
    )
    apply(
        control_plane,
        gpu_job("victim", namespace, "lq", priority=low),
        gpu_job("warmup", namespace, "lq", priority=low, runs_for="1s"),
    )
    wait_for("victim running", lambda: running_pods(control_plane, namespace, "victim"))
    wait_for(
        "warmup finished",
        lambda: is_true(workload_of(control_plane, namespace, "warmup"), names.COND_FINISHED),
    )
    apply(control_plane, gpu_job("filler", namespace, "lq", priority=low, runs_for="20s"))
    wait_for("filler admitted", lambda: admitted(control_plane, namespace, "filler"))
    apply(control_plane, gpu_job("urgent", namespace, "lq", priority=high))
    _, message = wait_for_pending_reason(
        control_plane, namespace, "urgent", names.REASON_WAITING_FOR_QUOTA, timeout=30
    )
    assert "instead of preempting 1 workload(s)" in message, message
    wait_for("urgent running", lambda: running_pods(control_plane, namespace, "urgent"), timeout=60)
    assert preempted_jobs(control_plane, namespace, ["victim", "filler"]) == []
    assert running_pods(control_plane, namespace, "victim")
