"""Nodes that fail otherwise than by a GPU, on the real control plane.

A kwok node "loses its kubelet": kwok stops writing its status and confirming its pods'
deletion (testenv.queuectl.io/kubelet-stopped on the node and its pods) and its Ready condition
turns Unknown, as the node lifecycle controller writes it. The module's controller drains it
after its node failure time, the gang's pods stuck terminating there are force-deleted, and the
gang is re-admitted whole on the other nodes; the node's GPUs leave the flavor's capacity and
come back with the node. A node whose GPU agent went silent gets the `unknown` taint: nothing
new lands there, nothing running is evicted.
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
    get,
    gpu_job,
    is_true,
    items,
    local_queue,
    pods_of,
    running_controller,
    running_pods,
    topology,
    wait_for,
    workload_of,
)
from e2e.test_e2e_gpu_health import metric
from queuectl import convert
from queuectl.api import names
from queuectl.testenv.cluster import Cluster

FAILURE_S = 8
SILENCE_S = 20
POOL = "e2e.queuectl.io/pool"


@pytest.fixture(scope="module")
def controller(
    control_plane: Cluster, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ControllerProcess]:
    """This module's controller, with short node failure and agent silence times."""
    log_dir = tmp_path_factory.mktemp("controller-node-failures")
    args = [f"--node-failure-seconds={FAILURE_S}", f"--agent-silence-seconds={SILENCE_S}"]
    with running_controller(control_plane, log_dir, args) as proc:
        yield proc


def own_pool(cluster: Cluster, namespace: str, prefix: str, count: int, gpus: int) -> set[str]:
    """`count` kwok H100 nodes of this test's own, its flavor, ClusterQueue and LocalQueue `lq`."""
    nodes = cluster.add_gpu_nodes(count, name_prefix=prefix, labels={POOL: prefix})
    flavor = {
        "apiVersion": names.API_VERSION,
        "kind": "ResourceFlavor",
        "metadata": {"name": prefix},
        "spec": {"nodeLabels": {POOL: prefix}},
    }
    cq = f"cq-{namespace}"
    apply(
        cluster,
        flavor,
        cluster_queue(cq, namespace, {prefix: gpus}),
        local_queue("lq", namespace, cq),
    )
    return {n.name for n in nodes}


def capacity(controller: ControllerProcess, flavor: str) -> float:
    return metric(controller.metrics(), "queuectl_flavor_gpus", flavor=flavor, kind="capacity")


def patch_status(cluster: Cluster, node: str, conditions: list[dict[str, Any]]) -> None:
    body = json.dumps({"status": {"conditions": conditions}})
    cluster.kubectl("patch", "node", node, "--subresource=status", "--type=strategic", "-p", body)


STOPPED = names.ANNOTATION_TESTENV_KUBELET_STOPPED


def go_dark(cluster: Cluster, node: str, pods: list[dict[str, Any]]) -> None:
    """The node's kubelet stops: kwok no longer writes the node's status nor confirms the
    deletion of its pods, and the node reads as the node lifecycle controller writes an
    unreachable one."""
    for pod in pods:
        meta = pod["metadata"]
        cluster.kubectl("annotate", "pod", meta["name"], "-n", meta["namespace"], f"{STOPPED}=true")
    cluster.kubectl("annotate", "node", node, f"{STOPPED}=true")
    now = convert.format_time(time.time())
    unknown = {
        "type": "Ready",
        "status": "Unknown",
        "reason": "NodeStatusUnknown",
        "message": "Kubelet stopped posting node status.",
        "lastHeartbeatTime": now,
        "lastTransitionTime": now,
    }
    patch_status(cluster, node, [unknown])


def come_back(cluster: Cluster, node: str) -> None:
    """The kubelet is back: kwok makes the node Ready again (its node-ready stage)."""
    cluster.kubectl("annotate", "node", node, f"{STOPPED}-")


def is_ready(node: dict[str, Any]) -> bool:
    return (condition(node, "Ready") or {}).get("status") == "True"


def test_a_dark_node_is_drained_and_its_gang_readmitted_elsewhere_its_gpus_leave_capacity(
    control_plane: Cluster, namespace: str, controller: ControllerProcess
) -> None:
    prefix = f"dark{int(time.time()) % 100000}"
    ours = own_pool(control_plane, namespace, prefix, 4, 32)
    wait_for("the pool's capacity", lambda: capacity(controller, prefix) == 32)

    # A gang of two 8-GPU pods; its pods take 5 s to stop, so on a dead node they stay
    # Terminating: no kubelet ever confirms them.
    job = gpu_job("gang", namespace, "lq", pods=2, gpus=8)
    job["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] = 5
    apply(control_plane, job)
    pods = wait_for(
        "the gang running",
        lambda: (r := running_pods(control_plane, namespace, "gang")) and len(r) == 2 and r,
    )
    placed = {p["spec"]["nodeName"] for p in pods}
    assert placed <= ours
    dark = sorted(placed)[0]
    first = workload_of(control_plane, namespace, "gang")
    assert first is not None

    go_dark(control_plane, dark, [p for p in pods if p["spec"]["nodeName"] == dark])
    time.sleep(1)
    assert not is_ready(get(control_plane, "node", dark))  # kwok no longer undoes it
    wait_for("the dark node's GPUs to leave capacity", lambda: capacity(controller, prefix) == 24)

    def readmitted_elsewhere() -> list[dict[str, Any]] | None:
        wl = workload_of(control_plane, namespace, "gang")
        requeued = condition(wl or {}, names.COND_REQUEUED) or {}
        if requeued.get("reason") != names.REASON_EVICTED_NODE_FAILURES:
            return None
        if not is_true(wl, names.COND_ADMITTED):
            return None
        running = running_pods(control_plane, namespace, "gang")
        return running if len(running) == 2 else None

    running = wait_for("the gang re-admitted on live nodes", readmitted_elsewhere, timeout=120)
    assert dark not in {p["spec"]["nodeName"] for p in running}
    assert {p["spec"]["nodeName"] for p in running} <= ours
    wl = workload_of(control_plane, namespace, "gang")
    assert wl is not None and wl["metadata"]["uid"] == first["metadata"]["uid"]
    evicted = condition(wl, names.COND_EVICTED) or {}
    assert evicted.get("reason") == names.REASON_EVICTED_NODE_FAILURES
    # The stuck pod was force-deleted: nothing of the gang is left on the dark node.
    assert not [
        p for p in pods_of(control_plane, namespace, "gang") if p["spec"].get("nodeName") == dark
    ]
    node = get(control_plane, "node", dark)
    assert node["spec"].get("unschedulable") is True
    record = json.loads(node["metadata"]["annotations"][names.ANNOTATION_NODE_DRAINED])
    assert record["reason"] == names.REASON_NODE_UNREACHABLE
    text = controller.metrics()
    assert metric(text, "queuectl_nodes_drained_total", reason=names.REASON_NODE_UNREACHABLE) >= 1
    assert metric(text, "queuectl_pods_force_deleted_total") >= 1

    # The node comes back: uncordoned, its GPUs count again.
    come_back(control_plane, dark)
    wait_for(
        "the controller to restore the node",
        lambda: (
            is_ready(n := get(control_plane, "node", dark))
            and not n["spec"].get("unschedulable")
            and names.ANNOTATION_NODE_DRAINED not in (n["metadata"].get("annotations") or {})
        ),
        timeout=90,
    )
    wait_for("the node's GPUs back in capacity", lambda: capacity(controller, prefix) == 32)
    control_plane.kubectl("delete", "job", "gang", "-n", namespace, "--wait=false")


def test_a_silent_agent_makes_gpus_unknown_without_evicting(
    control_plane: Cluster, namespace: str, controller: ControllerProcess
) -> None:
    prefix = f"mute{int(time.time()) % 100000}"
    ours = own_pool(control_plane, namespace, prefix, 2, 16)
    apply(control_plane, gpu_job("first", namespace, "lq", gpus=8))
    (pod,) = wait_for(
        "the first job running", lambda: running_pods(control_plane, namespace, "first")
    )
    busy = pod["spec"]["nodeName"]
    (idle,) = ours - {busy}

    # Both agents last beat an hour ago.
    old = convert.format_time(time.time() - 3600)
    for name in ours:
        beat = {
            "type": names.NODE_CONDITION_GPU_HEALTHY,
            "status": "True",
            "reason": names.REASON_GPU_ALL_HEALTHY,
            "message": "all GPUs healthy",
            "lastHeartbeatTime": old,
            "lastTransitionTime": old,
        }
        patch_status(control_plane, name, [beat])

    def unknown(name: str) -> bool:
        taints = get(control_plane, "node", name)["spec"].get("taints") or []
        return any(t["key"] == names.TAINT_GPU_UNKNOWN for t in taints)

    wait_for("both nodes' GPUs unknown", lambda: unknown(busy) and unknown(idle))
    wait_for("the pool's capacity gone", lambda: capacity(controller, prefix) == 0)

    # Nothing new lands on the idle node; the running job is left alone.
    apply(control_plane, gpu_job("second", namespace, "lq", gpus=8))
    time.sleep(3)
    assert running_pods(control_plane, namespace, "second") == []
    assert [p["spec"]["nodeName"] for p in running_pods(control_plane, namespace, "first")] == [
        busy
    ]
    first = workload_of(control_plane, namespace, "first")
    assert first is not None and not is_true(first, names.COND_EVICTED)

    # The idle node's agent beats again: the taint goes and the second job runs there.
    now = convert.format_time(time.time())
    patch_status(
        control_plane,
        idle,
        [
            {
                "type": names.NODE_CONDITION_GPU_HEALTHY,
                "status": "True",
                "reason": names.REASON_GPU_ALL_HEALTHY,
                "message": "all GPUs healthy",
                "lastHeartbeatTime": now,
                "lastTransitionTime": old,
            }
        ],
    )
    wait_for("the idle node's taint lifted", lambda: not unknown(idle))
    (second,) = wait_for(
        "the second job running on it", lambda: running_pods(control_plane, namespace, "second")
    )
    assert second["spec"]["nodeName"] == idle
    for job in ("first", "second"):
        control_plane.kubectl("delete", "job", job, "-n", namespace, "--wait=false")


RACK_ONLY = {names.ANNOTATION_PODSET_REQUIRED_TOPOLOGY: names.LABEL_TOPOLOGY_RACK}
SLICED = {
    **RACK_ONLY,
    names.ANNOTATION_PODSET_SLICE_REQUIRED_TOPOLOGY: names.LABEL_TOPOLOGY_RACK,
    names.ANNOTATION_PODSET_SLICE_SIZE: "2",
}


def pinned_host(pod: dict[str, Any]) -> str | None:
    """The host the pinning webhook gave the pod (None: it was not pinned)."""
    affinity = ((pod["spec"].get("affinity") or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution"
    ) or {}
    hosts = {
        tuple(e["values"])
        for t in affinity.get("nodeSelectorTerms") or ()
        for e in t.get("matchExpressions") or ()
        if e["key"] == names.LABEL_HOSTNAME
    }
    return hosts.pop()[0] if len(hosts) == 1 else None


@pytest.mark.parametrize(
    ("shape", "annotations"), [("rack", RACK_ONLY), ("sliced-indexed", SLICED)]
)
def test_a_dark_node_under_a_rack_gang_is_hot_swapped_the_rest_keeps_running(
    control_plane: Cluster,
    namespace: str,
    controller: ControllerProcess,
    shape: str,
    annotations: dict[str, str],
) -> None:
    """Two racks of five H100 nodes behind a flavor with block/rack/host topology; a gang of two
    8-GPU pods required in one rack (`rack`), or an Indexed Job whose pods are pinned one by
    one to their nodes (`sliced-indexed`: a slice of 2 per rack). One of its nodes goes dark:
    its pod moves to a free node of the same rack (a pinned pod is pinned there by the webhook,
    from the Workload's new assignment), the other pod keeps running, the Workload is never
    evicted."""
    prefix = f"swap{int(time.time()) % 100000}"
    nodes = control_plane.add_gpu_nodes(
        10, racks_per_block=2, name_prefix=prefix, labels={POOL: prefix}
    )
    rack_of = {n.name: n.rack for n in nodes}
    topo = f"topo-{prefix}"
    levels = (names.LABEL_TOPOLOGY_BLOCK, names.LABEL_TOPOLOGY_RACK, names.LABEL_HOSTNAME)
    cq = f"cq-{namespace}"
    apply(
        control_plane,
        topology(topo, *levels),
        {
            "apiVersion": names.API_VERSION,
            "kind": "ResourceFlavor",
            "metadata": {"name": prefix},
            "spec": {"nodeLabels": {POOL: prefix}, "topologyName": topo},
        },
        cluster_queue(cq, namespace, {prefix: 80}),
        local_queue("lq", namespace, cq),
    )
    wait_for("the pool's capacity", lambda: capacity(controller, prefix) == 80)

    job = gpu_job("gang", namespace, "lq", pods=2, gpus=8, annotations=annotations)
    job["spec"]["backoffLimit"] = 2  # the moved pod counts as one failure of the Job
    if shape == "sliced-indexed":
        job["spec"]["completionMode"] = "Indexed"
    apply(control_plane, job)
    pods = wait_for(
        "the gang running",
        lambda: (r := running_pods(control_plane, namespace, "gang")) and len(r) == 2 and r,
    )
    if shape == "sliced-indexed":
        assert all(pinned_host(p) == p["spec"]["nodeName"] for p in pods)
    (gang_rack,) = {rack_of[p["spec"]["nodeName"]] for p in pods}
    dark = sorted(p["spec"]["nodeName"] for p in pods)[0]
    (survivor,) = [p for p in pods if p["spec"]["nodeName"] != dark]
    first = workload_of(control_plane, namespace, "gang")
    assert first is not None
    go_dark(control_plane, dark, [p for p in pods if p["spec"]["nodeName"] == dark])

    def swapped() -> list[dict[str, Any]] | None:
        running = running_pods(control_plane, namespace, "gang")
        if len(running) != 2 or dark in {p["spec"]["nodeName"] for p in running}:
            return None
        return running

    running = wait_for("the dark node's pod running elsewhere in its rack", swapped, timeout=90)
    assert {rack_of[p["spec"]["nodeName"]] for p in running} == {gang_rack}
    assert survivor["metadata"]["uid"] in {p["metadata"]["uid"] for p in running}
    wl = workload_of(control_plane, namespace, "gang")
    assert wl is not None and wl["metadata"]["uid"] == first["metadata"]["uid"]
    assert not is_true(wl, names.COND_EVICTED) and is_true(wl, names.COND_ADMITTED)
    (psa,) = wl["status"]["admission"]["podSetAssignments"]
    counted = [d["values"][-1] for d in psa["topologyAssignment"]["domains"]]
    assert dark not in counted and {rack_of[n] for n in counted} == {gang_rack}
    if shape == "sliced-indexed":  # pinned where the assignment now says
        assert all(pinned_host(p) == p["spec"]["nodeName"] for p in running)
        assert {p["spec"]["nodeName"] for p in running} == set(counted)
    reasons = {
        e.get("reason")
        for e in items(control_plane, "events.events.k8s.io", namespace)
        if (e.get("regarding") or {}).get("name") == wl["metadata"]["name"]
    }
    assert names.EVENT_NODE_HOT_SWAPPED in reasons
    assert metric(controller.metrics(), "queuectl_node_hot_swaps_total") >= 1
    control_plane.kubectl("delete", "job", "gang", "-n", namespace, "--wait=false")
    come_back(control_plane, dark)
