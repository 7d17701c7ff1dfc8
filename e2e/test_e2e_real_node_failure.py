"""A real node whose kubelet stops, on a control plane of the module's own.

The real node (kubelet + containerd) advertises 4 GPUs as an extended resource (the way a
cluster admin advertises one without a device plugin), under a device name of their own that
the flavor serves `nvidia.com/gpu` with (`gpuResource`): a device plugin that ever ran on this
host left `nvidia.com/gpu` in the kubelet's device checkpoint (its directory is fixed for the
whole host), and the kubelet would refuse a pod asking for it. A Job of one 4-GPU pod runs
there, in the node's containerd. Its kubelet process is stopped: the node lifecycle controller
marks the node Unknown after its grace period, the controller (node failure time 5 s) drains
it and evicts the Job, the pod left terminating on the dead node is force-deleted, and the
Workload is requeued ahead of its peers with its quota released; the node's GPUs no longer
count.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import pytest

from e2e.harness import (
    ControllerProcess,
    apply,
    cluster_queue,
    condition,
    is_true,
    items,
    local_queue,
    running_controller,
    running_pods,
    topology,
    wait_for,
    workload_of,
)
from e2e.test_e2e_gpu_health import metric
from queuectl.api import names
from queuectl.testenv import ControlPlane
from queuectl.testenv.build import ensure_binaries
from queuectl.testenv.nodeconfig import REAL_NODE_LABEL
from queuectl.testenv.realnode import PAUSE_IMAGE, recorded

pytestmark = [pytest.mark.cluster, pytest.mark.real_node]

TEAM = "team-dead-node"
FLAVOR = "real-gpus"
GPUS = 4
HOSTS = "deadnode-hosts"
"""A Topology of hosts alone: admission then counts each node's free GPUs, so a Workload
requeued off the dead node stays pending instead of being admitted again on quota alone."""
DEVICE = "nvidia.com/testenv-gpu"
"""The flavor's stand-in for nvidia.com/gpu, advertised by the node's status."""
FAILURE_S = 5


@pytest.fixture(scope="module")
def plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    cp = ControlPlane(
        tmp_path_factory.mktemp("deadnode"),
        name="deadnode",
        binaries=ensure_binaries(),
        real_nodes=1,
    )
    try:
        cp.start()
        yield cp
    finally:
        cp.stop()


@pytest.fixture(scope="module")
def controller(
    plane: ControlPlane, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ControllerProcess]:
    log_dir = tmp_path_factory.mktemp("controller-deadnode")
    with running_controller(plane, log_dir, [f"--node-failure-seconds={FAILURE_S}"]) as proc:
        yield proc


def advertise_gpus(plane: ControlPlane, node: str, count: int) -> None:
    """An extended resource on the node's status, which its kubelet keeps and admits against."""
    key = DEVICE.replace("/", "~1")
    ops = [
        {"op": "add", "path": f"/status/capacity/{key}", "value": str(count)},
        {"op": "add", "path": f"/status/allocatable/{key}", "value": str(count)},
    ]
    plane.kubectl(
        "patch", "node", node, "--subresource=status", "--type=json", "-p", json.dumps(ops)
    )


def gpu_job_on_the_node(name: str) -> dict[str, Any]:
    request = {names.GPU_RESOURCE: str(GPUS)}
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": TEAM, "labels": {names.LABEL_QUEUE_NAME: "lq"}},
        "spec": {
            "backoffLimit": 0,
            "template": {
                "metadata": {
                    "annotations": {names.ANNOTATION_PODSET_REQUIRED_TOPOLOGY: names.LABEL_HOSTNAME}
                },
                "spec": {
                    "restartPolicy": "Never",
                    "terminationGracePeriodSeconds": 1,
                    "containers": [
                        {
                            "name": "train",
                            "image": PAUSE_IMAGE,
                            "imagePullPolicy": "Never",
                            "resources": {"requests": request, "limits": request},
                        }
                    ],
                },
            },
        },
    }


def capacity(controller: ControllerProcess) -> float:
    return metric(controller.metrics(), "queuectl_flavor_gpus", flavor=FLAVOR, kind="capacity")


def test_the_real_nodes_kubelet_stops_its_job_is_requeued_and_its_gpus_leave_capacity(
    plane: ControlPlane, controller: ControllerProcess
) -> None:
    (node,) = recorded(plane.work_dir)
    advertise_gpus(plane, node.name, GPUS)
    plane.kubectl("create", "namespace", TEAM)
    flavor = {
        "apiVersion": names.API_VERSION,
        "kind": "ResourceFlavor",
        "metadata": {"name": FLAVOR},
        "spec": {
            "nodeLabels": {REAL_NODE_LABEL: "true"},
            "gpuResource": DEVICE,
            "topologyName": HOSTS,
        },
    }
    cq = cluster_queue("cq-dead-node", TEAM, {FLAVOR: GPUS})
    apply(
        plane,
        topology(HOSTS, names.LABEL_HOSTNAME),
        flavor,
        cq,
        local_queue("lq", TEAM, "cq-dead-node"),
    )
    wait_for("the real node's GPUs in capacity", lambda: capacity(controller) == GPUS)

    apply(plane, gpu_job_on_the_node("train"))
    try:
        (pod,) = wait_for(
            "the Job's pod running on the real node",
            lambda: running_pods(plane, TEAM, "train"),
            timeout=120,
        )
    except AssertionError:
        shown = plane.kubectl("get", "workloads,pods,events", "-n", TEAM, "-o", "yaml").stdout
        raise AssertionError(f"the Job never ran; its namespace:\n{shown[-6000:]}") from None
    assert pod["spec"]["nodeName"] == node.name
    first = workload_of(plane, TEAM, "train")
    assert first is not None and is_true(first, names.COND_ADMITTED)

    plane.stop_process(f"kubelet-{node.name}")

    def requeued() -> dict[str, Any] | None:
        wl = workload_of(plane, TEAM, "train")
        cond = condition(wl or {}, names.COND_REQUEUED) or {}
        if cond.get("reason") != names.REASON_EVICTED_NODE_FAILURES:
            return None
        return wl if wl is not None and not is_true(wl, names.COND_QUOTA_RESERVED) else None

    # The node lifecycle controller's grace period (50 s), then our 5 s, then the pod's 1 s.
    wl = wait_for("the Job requeued with its quota released", requeued, timeout=240)
    said = [
        str(e.get("note") or "")
        for e in items(plane, "events.events.k8s.io", TEAM)
        if e.get("reason") == names.EVENT_EVICTED
        and (e.get("regarding") or {}).get("name") == wl["metadata"]["name"]
    ]
    assert any(f"Node {node.name} is not Ready" in n and "no node hot swap" in n for n in said), (
        said
    )
    assert wl["metadata"]["uid"] == first["metadata"]["uid"]
    assert not (wl.get("status") or {}).get("admission")
    evicted = condition(wl, names.COND_EVICTED) or {}
    assert evicted.get("reason") == names.REASON_EVICTED_NODE_FAILURES
    wait_for("the dead node's GPUs out of capacity", lambda: capacity(controller) == 0)
    drained = plane.kubectl("get", "node", node.name, "-o", "json").stdout
    record = json.loads(
        json.loads(drained)["metadata"]["annotations"][names.ANNOTATION_NODE_DRAINED]
    )
    assert record["reason"] == names.REASON_NODE_UNREACHABLE
    # The stuck pod was force-deleted, so the Job controller let the quota go.
    assert not running_pods(plane, TEAM, "train")
    assert metric(controller.metrics(), "queuectl_pods_force_deleted_total") >= 1
    # Nowhere to go: it waits, holding nothing, while its node is dead.
    time.sleep(FAILURE_S)
    after = workload_of(plane, TEAM, "train")
    assert after is not None and not is_true(after, names.COND_QUOTA_RESERVED)
