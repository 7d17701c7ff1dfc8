"""Issue 12 on the real control plane: no way around a queue's quota by changing a queued Job.

Finding 1: scaling a waiting Job resizes its Workload (it never runs on quota sized for fewer
pods); scaling an admitted one is refused. Finding 3: relabelling a waiting Job to another
LocalQueue moves its Workload there. Finding 9: a WorkloadPriorityClass with a
namespaceSelector is refused elsewhere, and a running Job may move between classes its
namespace may use (its Workload follows).
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from e2e.harness import (
    ControllerProcess,
    admitted,
    apply,
    cluster_queue,
    condition,
    controller,
    flavor,
    get,
    gpu_job,
    local_queue,
    one_queue,
    priority_class,
    running_pods,
    wait_for,
    wait_for_pending_reason,
    workload_of,
)
from queuectl.api import names
from queuectl.testenv.cluster import Cluster, KubectlFailed
from queuectl.testenv.nodes import H100
from queuectl.testenv.pytest_plugin import StandardFleet

__all__ = ["controller"]

GPU = names.GPU_RESOURCE


def gpus_running(cluster: Cluster, namespace: str, *jobs: str) -> int:
    """GPUs the running pods of these Jobs take, from the pods themselves."""
    total = 0
    for job in jobs:
        for pod in running_pods(cluster, namespace, job):
            for c in pod["spec"]["containers"]:
                total += int(((c.get("resources") or {}).get("requests") or {}).get(GPU, 0))
    return total


def patch_job(cluster: Cluster, namespace: str, job: str, patch: dict[str, Any]) -> str:
    """kubectl patch as a user; returns what kubectl printed (warnings included)."""
    done = cluster.kubectl(
        "patch", "job", job, "-n", namespace, "--type=merge", "-p", json.dumps(patch)
    )
    return done.stdout + done.stderr


def refused(cluster: Cluster, *args: str, input: str | None = None) -> str:
    done = cluster.kubectl(*args, check=False, input=input)
    assert done.returncode != 0, f"kubectl {' '.join(args)} was accepted: {done.stdout}"
    return done.stderr


def pod_count(cluster: Cluster, namespace: str, job: str) -> int:
    wl = workload_of(cluster, namespace, job)
    return int(wl["spec"]["podSets"][0]["count"]) if wl else -1


def test_scaling_a_queued_job_never_runs_more_than_its_queue_admits(
    control_plane: Cluster, namespace: str, gpu_nodes: StandardFleet, controller: ControllerProcess
) -> None:
    """The issue's scenario: parallelism 1, completions 8, 2 GPUs a pod, behind a full 8-GPU
    ClusterQueue, patched to parallelism 8 while it waits."""
    one_queue(control_plane, namespace, 8)
    apply(control_plane, gpu_job("blocker", namespace, "lq", pods=4, gpus=2))
    wait_for("the queue full", lambda: len(running_pods(control_plane, namespace, "blocker")) == 4)
    scaled = gpu_job("scaled", namespace, "lq", pods=1, gpus=2)
    scaled["spec"]["completions"] = 8
    apply(control_plane, scaled)
    wait_for_pending_reason(control_plane, namespace, "scaled", names.REASON_WAITING_FOR_QUOTA)

    said = patch_job(control_plane, namespace, "scaled", {"spec": {"parallelism": 8}})
    assert "queuectl resizes the Job's Workload" in said
    wait_for("the Workload resized", lambda: pod_count(control_plane, namespace, "scaled") == 8)
    _, message = wait_for_pending_reason(
        control_plane, namespace, "scaled", names.REASON_EXCEEDS_MAX_QUOTA
    )
    assert "needs 16 nvidia.com/gpu" in message

    # The queue frees: a later Job that fits is admitted, the resized one is not.
    control_plane.kubectl("delete", "job", "blocker", "-n", namespace, "--wait=true")
    apply(control_plane, gpu_job("probe", namespace, "lq", pods=1, gpus=2))
    wait_for("the probe running", lambda: running_pods(control_plane, namespace, "probe"))
    assert not admitted(control_plane, namespace, "scaled")
    assert running_pods(control_plane, namespace, "scaled") == []
    assert gpus_running(control_plane, namespace, "blocker", "probe", "scaled") <= 8

    # Scaled to what the queue holds, it is admitted with that many pods.
    control_plane.kubectl("delete", "job", "probe", "-n", namespace, "--wait=true")
    patch_job(control_plane, namespace, "scaled", {"spec": {"parallelism": 4}})
    wait_for("4 pods running", lambda: len(running_pods(control_plane, namespace, "scaled")) == 4)
    assert pod_count(control_plane, namespace, "scaled") == 4

    # Admitted, it keeps its shape: scaling up is refused, and nothing more runs.
    stderr = refused(
        control_plane,
        "patch",
        "job",
        "scaled",
        "-n",
        namespace,
        "--type=merge",
        "-p",
        json.dumps({"spec": {"parallelism": 8}}),
    )
    assert (
        "it cannot change the pods it runs at once (parallelism, at most completions) from 4 "
        "to 8 while it is admitted" in stderr
    )
    assert get(control_plane, "job", "scaled", namespace)["spec"]["parallelism"] == 4
    assert gpus_running(control_plane, namespace, "scaled") == 8


def test_relabelling_a_waiting_job_moves_its_workload_to_the_new_queue(
    control_plane: Cluster, namespace: str, gpu_nodes: StandardFleet, controller: ControllerProcess
) -> None:
    cq_a, cq_b = f"cq-a-{namespace}", f"cq-b-{namespace}"
    apply(
        control_plane,
        flavor("h100", H100),
        cluster_queue(cq_a, namespace, {"h100": 8}),
        cluster_queue(cq_b, namespace, {"h100": 8}),
        local_queue("qa", namespace, cq_a),
        local_queue("qb", namespace, cq_b),
    )
    apply(control_plane, gpu_job("blocker", namespace, "qa", pods=1, gpus=8))
    wait_for("qa full", lambda: running_pods(control_plane, namespace, "blocker"))
    apply(control_plane, gpu_job("mover", namespace, "qa", pods=1, gpus=8))
    wait_for_pending_reason(control_plane, namespace, "mover", names.REASON_WAITING_FOR_QUOTA)

    control_plane.kubectl(
        "label", "job", "mover", "-n", namespace, f"{names.LABEL_QUEUE_NAME}=qb", "--overwrite"
    )
    wait_for("running in qb", lambda: running_pods(control_plane, namespace, "mover"))
    wl = workload_of(control_plane, namespace, "mover")
    assert wl is not None
    assert wl["spec"]["queueName"] == "qb"
    assert wl["metadata"]["labels"][names.LABEL_QUEUE_NAME] == "qb"
    assert wl["status"]["admission"]["clusterQueue"] == cq_b
    labels = get(control_plane, "job", "mover", namespace)["metadata"]["labels"]
    assert labels[names.LABEL_CLUSTER_QUEUE] == cq_b

    # Admitted, the label stays where it is.
    stderr = refused(
        control_plane,
        "label",
        "job",
        "mover",
        "-n",
        namespace,
        f"{names.LABEL_QUEUE_NAME}=qa",
        "--overwrite",
    )
    assert "cannot change from 'qb' to 'qa' while the Job is admitted" in stderr


def restricted_class(name: str, value: int, namespace: str) -> dict[str, Any]:
    """A WorkloadPriorityClass only `namespace` may use."""
    wpc = priority_class(name, value)
    wpc["namespaceSelector"] = {"matchLabels": {"kubernetes.io/metadata.name": namespace}}
    return wpc


def test_a_priority_class_is_only_usable_where_its_namespace_selector_allows(
    control_plane: Cluster, namespace: str, gpu_nodes: StandardFleet, controller: ControllerProcess
) -> None:
    one_queue(control_plane, namespace, 8)
    top, mine, low = f"top-{namespace}", f"mine-{namespace}", f"low-{namespace}"
    apply(
        control_plane,
        restricted_class(top, 100000, "platform-team"),
        restricted_class(mine, 500, namespace),
        priority_class(low, 1),
    )
    job = gpu_job("greedy", namespace, "lq", priority=top)
    # The webhook answers from the controller's cache: wait until it knows the classes.
    stderr = wait_for(
        "the class refused here",
        lambda: (
            (
                done := control_plane.kubectl(
                    "create", "--dry-run=server", "-f", "-", check=False, input=json.dumps(job)
                )
            ).returncode
            != 0
            and done.stderr
        ),
    )
    assert (
        f"WorkloadPriorityClass '{top}' may not be used in namespace '{namespace}': its "
        "namespaceSelector does not select this namespace" in stderr
    )
    with pytest.raises(KubectlFailed):
        apply(control_plane, job)

    apply(control_plane, gpu_job("train", namespace, "lq", priority=mine))
    wait_for("train running", lambda: running_pods(control_plane, namespace, "train"))
    assert workload_of(control_plane, namespace, "train")["spec"]["priority"] == 500  # type: ignore[index]

    # Running: escalating to a class this namespace may not use is refused ...
    stderr = refused(
        control_plane,
        "label",
        "job",
        "train",
        "-n",
        namespace,
        f"{names.LABEL_PRIORITY_CLASS}={top}",
        "--overwrite",
    )
    assert f"WorkloadPriorityClass '{top}' may not be used in namespace" in stderr
    # ... moving to one it may use re-prioritises the running Workload (as Kueue does).
    control_plane.kubectl(
        "label",
        "job",
        "train",
        "-n",
        namespace,
        f"{names.LABEL_PRIORITY_CLASS}={low}",
        "--overwrite",
    )
    wl = wait_for(
        "the Workload at the new priority",
        lambda: (
            (w := workload_of(control_plane, namespace, "train"))
            and w["spec"].get("priority") == 1
            and w
        ),
    )
    assert wl["spec"]["priorityClassName"] == low
    assert condition(wl, names.COND_ADMITTED)["status"] == "True"  # type: ignore[index]
    assert running_pods(control_plane, namespace, "train")
