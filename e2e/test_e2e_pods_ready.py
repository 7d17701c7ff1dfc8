"""Admitted but not running, on the real control plane: a gang whose pods the real
kube-scheduler cannot place, or that loses a pod it cannot get back, gives its GPUs back after
its ClusterQueue's pods-ready timeout, is requeued with back-off, and the next job runs.

Each test has its own 8-GPU H100 node (tainted, so only its flavor reaches it) and a ClusterQueue
of 8 GPUs whose `spec.waitForPodsReady` sets 10-second timeouts; the controller's default
back-off (60 s) keeps the evicted job out of the way while the next one is admitted.
"""

from __future__ import annotations

from typing import Any

from e2e.harness import (
    POOL,
    ControllerProcess,
    admitted,
    apply,
    cluster_queue,
    condition,
    flavor,
    get,
    gpu_job,
    in_pool,
    items,
    local_queue,
    pool_taint,
    running_pods,
    wait_for,
    workload_of,
)
from queuectl.api import names
from queuectl.api.views import WorkloadView
from queuectl.testenv.cluster import Cluster
from queuectl.testenv.nodes import H100

TIMEOUTS = {"timeoutSeconds": 10, "recoveryTimeoutSeconds": 10}


def pool_queue(cluster: Cluster, namespace: str, prefix: str) -> None:
    cluster.add_gpu_nodes(1, name_prefix=prefix, labels={POOL: prefix}, taints=[pool_taint(prefix)])
    cq = f"cq-{namespace}"
    apply(
        cluster,
        in_pool(flavor(prefix, H100), prefix),
        cluster_queue(cq, namespace, {prefix: 8}, waitForPodsReady=TIMEOUTS),
        local_queue("lq", namespace, cq),
    )


def evicted_for_pods_ready(cluster: Cluster, namespace: str, job: str) -> dict[str, Any] | None:
    """The Workload once it has been requeued after a PodsReadyTimeout."""
    wl = workload_of(cluster, namespace, job)
    requeued = condition(wl or {}, names.COND_REQUEUED) or {}
    if requeued.get("reason") != names.REASON_EVICTED_PODS_READY_TIMEOUT:
        return None
    return wl


def eviction_note(cluster: Cluster, namespace: str, wl: dict[str, Any]) -> str:
    """What the Evicted Event said (the condition's message is replaced once it is requeued)."""
    name = wl["metadata"]["name"]
    notes = [
        str(e.get("note") or "")
        for e in items(cluster, "events.events.k8s.io", namespace)
        if e.get("reason") == names.EVENT_EVICTED and (e.get("regarding") or {}).get("name") == name
    ]
    assert notes, f"no Evicted event for {name}"
    return notes[-1]


def test_a_gang_the_scheduler_cannot_place_frees_its_quota_and_the_next_job_runs(
    control_plane: Cluster, controller: ControllerProcess, namespace: str
) -> None:
    pool_queue(control_plane, namespace, f"pr-{namespace}"[:40])
    stuck = gpu_job("stuck", namespace, "lq")
    stuck["spec"]["template"]["spec"]["nodeSelector"] = {"e2e.queuectl.io/nowhere": "true"}
    apply(control_plane, stuck)
    wait_for("stuck admitted", lambda: admitted(control_plane, namespace, "stuck"))
    apply(control_plane, gpu_job("next", namespace, "lq"))  # waits behind it for the 8 GPUs

    wl = wait_for(
        "stuck evicted for PodsReadyTimeout and requeued",
        lambda: evicted_for_pods_ready(control_plane, namespace, "stuck"),
        timeout=60,
    )
    view = WorkloadView(wl)
    assert not view.holds_quota
    assert view.status["requeueState"]["count"] == 1
    assert "startup timeout" in eviction_note(control_plane, namespace, wl)
    assert get(control_plane, "job", "stuck", namespace)["spec"]["suspend"] is True
    wait_for("next admitted", lambda: admitted(control_plane, namespace, "next"), timeout=60)
    wait_for("next running", lambda: running_pods(control_plane, namespace, "next"))


def test_a_running_gang_that_loses_a_pod_for_good_frees_its_quota(
    control_plane: Cluster, controller: ControllerProcess, namespace: str
) -> None:
    """Its node is cordoned and its pod deleted (as a node going bad would): the replacement
    pod cannot be placed, so the gang never recovers and its GPUs go back to the queue."""
    prefix = f"pr-{namespace}"[:40]
    pool_queue(control_plane, namespace, prefix)
    ranks = gpu_job("ranks", namespace, "lq")
    ranks["spec"]["backoffLimit"] = 6  # a deleted pod is a failure: the Job replaces it
    apply(control_plane, ranks)
    wait_for("ranks running", lambda: running_pods(control_plane, namespace, "ranks"), timeout=60)
    wait_for(
        "ranks PodsReady",
        lambda: (
            (
                condition(workload_of(control_plane, namespace, "ranks") or {}, "PodsReady") or {}
            ).get("status")
            == "True"
        ),
        timeout=60,
    )
    (pod,) = running_pods(control_plane, namespace, "ranks")
    node = pod["spec"]["nodeName"]
    control_plane.kubectl("cordon", node)
    control_plane.kubectl("delete", "pod", "-n", namespace, pod["metadata"]["name"], "--wait=false")

    wl = wait_for(
        "ranks evicted for PodsReadyTimeout and requeued",
        lambda: evicted_for_pods_ready(control_plane, namespace, "ranks"),
        timeout=90,
    )
    assert not WorkloadView(wl).holds_quota
    assert "recovery timeout" in eviction_note(control_plane, namespace, wl)
