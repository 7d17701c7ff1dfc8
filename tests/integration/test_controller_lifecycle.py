"""Stopping work: maximumExecutionTimeSeconds, and stopPolicy on ClusterQueues and LocalQueues."""

from __future__ import annotations

import time

from e2e.harness import (
    ControllerProcess,
    admitted,
    apply,
    condition,
    controller,
    get,
    gpu_job,
    is_true,
    one_queue,
    pods_of,
    running_pods,
    wait_for,
    workload_of,
)
from queuectl.api import names
from queuectl.testenv.cluster import Cluster
from queuectl.testenv.pytest_plugin import StandardFleet

__all__ = ["controller"]


def reason(cluster: Cluster, namespace: str, job: str) -> str | None:
    wl = workload_of(cluster, namespace, job)
    return (condition(wl or {}, names.COND_QUOTA_RESERVED) or {}).get("reason")


def test_maximum_execution_time_deactivates_and_stops_the_job(
    control_plane: Cluster, namespace: str, gpu_nodes: StandardFleet, controller: ControllerProcess
) -> None:
    one_queue(control_plane, namespace, 8)
    job = gpu_job("bounded", namespace, "lq")
    job["metadata"]["labels"][names.LABEL_MAX_EXEC_TIME] = "3"
    apply(control_plane, job)
    wait_for("running", lambda: running_pods(control_plane, namespace, "bounded"))
    wl = wait_for(
        "evicted for its time limit",
        lambda: (
            (w := workload_of(control_plane, namespace, "bounded"))
            and (condition(w, names.COND_EVICTED) or {}).get("reason")
            == names.REASON_EVICTED_MAX_EXEC_TIME
            and w
        ),
        timeout=30,
    )
    assert wl["spec"]["active"] is False
    wait_for(
        "job suspended, pods gone",
        lambda: (
            get(control_plane, "job", "bounded", namespace)["spec"]["suspend"]
            and not running_pods(control_plane, namespace, "bounded")
        ),
    )
    wait_for(
        "waits as inactive",
        lambda: reason(control_plane, namespace, "bounded") == "Inactive",
        timeout=30,
    )


def test_hold_and_drain_on_a_cluster_queue_evicts_and_resumes(
    control_plane: Cluster, namespace: str, gpu_nodes: StandardFleet, controller: ControllerProcess
) -> None:
    cq = one_queue(control_plane, namespace, 8)
    apply(control_plane, gpu_job("running", namespace, "lq"))
    wait_for("running admitted", lambda: admitted(control_plane, namespace, "running"))
    time.sleep(1.1)  # creationTimestamp has 1 s resolution: make "next" strictly younger
    apply(control_plane, gpu_job("next", namespace, "lq"))
    wait_for(
        "next waiting",
        lambda: reason(control_plane, namespace, "next") == names.REASON_WAITING_FOR_QUOTA,
    )
    control_plane.kubectl(
        "patch", "clusterqueue", cq, "--type=merge", "-p", '{"spec":{"stopPolicy":"HoldAndDrain"}}'
    )
    wait_for(
        "running drained",
        lambda: (
            (w := workload_of(control_plane, namespace, "running")) is not None
            and is_true(w, names.COND_REQUEUED)
        ),
        timeout=30,
    )
    assert get(control_plane, "job", "running", namespace)["spec"]["suspend"] is True
    assert not admitted(control_plane, namespace, "next")
    wait_for(
        "stopped reason",
        lambda: reason(control_plane, namespace, "next") == names.REASON_CLUSTER_QUEUE_STOPPED,
    )
    active = wait_for(
        "CQ inactive",
        lambda: (
            (c := condition(get(control_plane, "clusterqueue", cq), names.COND_ACTIVE))
            and c["status"] == "False"
            and c
        ),
    )
    assert active["reason"] == names.REASON_CLUSTER_QUEUE_STOPPED
    control_plane.kubectl(
        "patch", "clusterqueue", cq, "--type=merge", "-p", '{"spec":{"stopPolicy":"None"}}'
    )
    wait_for(
        "first back at its original position",
        lambda: admitted(control_plane, namespace, "running"),
        timeout=30,
    )
    assert not admitted(control_plane, namespace, "next")


def test_a_held_local_queue_keeps_new_work_waiting(
    control_plane: Cluster, namespace: str, gpu_nodes: StandardFleet, controller: ControllerProcess
) -> None:
    one_queue(control_plane, namespace, 8)
    control_plane.kubectl(
        "patch",
        "localqueue",
        "lq",
        "-n",
        namespace,
        "--type=merge",
        "-p",
        '{"spec":{"stopPolicy":"Hold"}}',
    )
    apply(control_plane, gpu_job("held", namespace, "lq"))
    wait_for(
        "held with a reason",
        lambda: reason(control_plane, namespace, "held") == names.REASON_LOCAL_QUEUE_STOPPED,
    )
    assert pods_of(control_plane, namespace, "held") == []
    control_plane.kubectl(
        "patch",
        "localqueue",
        "lq",
        "-n",
        namespace,
        "--type=merge",
        "-p",
        '{"spec":{"stopPolicy":"None"}}',
    )
    wait_for("admitted once released", lambda: admitted(control_plane, namespace, "held"))
