"""Sliced and balanced gangs on the real control plane, placed by the real kube-scheduler.

A pool of its own: one block, three racks of four 8-GPU nodes, each pair of nodes one NVLink
domain (`nvidia.com/gpu.clique`). A 64-GPU Indexed Job (8 pods x 8 GPUs) asks for slices of 4
pods per rack, each in slices of 2 per NVLink domain, all in the block: every pod lands on the
node the core chose for its index (the pod webhook pins it), so pods [4k, 4k+4) share a rack
and pods [2j, 2j+2) an NVLink domain, as the job's ranks expect. A balanced 6-pod gang then
spreads 3 and 3 over two racks where best fit would pack 4 and 2.
"""

from __future__ import annotations

import json
import time
from typing import Any

from e2e.harness import (
    ControllerProcess,
    apply,
    cluster_queue,
    flavor,
    get,
    gpu_job,
    in_pool,
    items,
    local_queue,
    pool_taint,
    running_pods,
    topology,
    wait_for,
    workload_of,
)
from queuectl.api import names
from queuectl.testenv.cluster import Cluster
from queuectl.testenv.nodes import H100

CLIQUE = names.LABEL_GPU_CLIQUE
RACK = names.LABEL_TOPOLOGY_RACK
BLOCK = names.LABEL_TOPOLOGY_BLOCK


def sliced_pool(cluster: Cluster, namespace: str, prefix: str) -> None:
    """12 tainted nodes of the test's own (3 racks of 4), NVLink domains of 2 nodes, a
    block/rack/clique/host Topology over them, and a ClusterQueue of 96 GPUs."""
    nodes = cluster.add_gpu_nodes(
        12, racks_per_block=3, name_prefix=prefix, labels={"e2e.queuectl.io/pool": prefix},
        taints=[pool_taint(prefix)],
    )  # fmt: skip
    for i in range(0, len(nodes), 2):
        pair = [n.name for n in nodes[i : i + 2]]
        cluster.kubectl("label", "node", *pair, f"{CLIQUE}={prefix}-c{i // 2}")
    topo, cq = f"topo-{namespace}", f"cq-{namespace}"
    apply(
        cluster,
        topology(topo, BLOCK, RACK, CLIQUE, names.LABEL_HOSTNAME),
        in_pool(flavor(prefix, H100, topology=topo), prefix),
        cluster_queue(cq, namespace, {prefix: 96}),
        local_queue("lq", namespace, cq),
    )


def indexed_job(name: str, namespace: str, pods: int, annotations: dict[str, str]) -> Any:
    job = gpu_job(name, namespace, "lq", pods=pods, annotations=annotations)
    job["spec"]["completionMode"] = "Indexed"
    return job


def placed(cluster: Cluster, namespace: str, job: str, pods: int) -> dict[int, dict[str, str]]:
    """Pod index -> its node's labels, once all `pods` run."""
    up = wait_for(
        f"{pods} pods of {job} running",
        lambda: len(p := running_pods(cluster, namespace, job)) == pods and p,
        timeout=90,
    )
    out = {}
    for pod in up:
        index = int(pod["metadata"]["labels"][names.LABEL_JOB_COMPLETION_INDEX])
        node = get(cluster, "node", pod["spec"]["nodeName"])
        out[index] = dict(node["metadata"]["labels"])
    return out


def assigned_nodes(wl: dict[str, Any]) -> list[str]:
    """The nodes the core chose, one per pod in pod order (the status lists them so)."""
    [psa] = wl["status"]["admission"]["podSetAssignments"]
    out = []
    for domain in psa["topologyAssignment"]["domains"]:
        out += [domain["values"][-1]] * int(domain["count"])
    return out


def test_a_64_gpu_gang_in_slices_lands_slice_by_slice_on_the_nodes_the_core_chose(
    control_plane: Cluster, namespace: str, controller: ControllerProcess
) -> None:
    prefix = f"sl{int(time.time()) % 100000}"
    sliced_pool(control_plane, namespace, prefix)
    slices = {
        names.ANNOTATION_PODSET_REQUIRED_TOPOLOGY: BLOCK,
        names.ANNOTATION_PODSET_SLICE_REQUIRED_TOPOLOGY: f"{RACK},{CLIQUE}",
        names.ANNOTATION_PODSET_SLICE_SIZE: "4,2",
    }
    apply(control_plane, indexed_job("gang", namespace, 8, slices))
    at = placed(control_plane, namespace, "gang", 8)
    wl = workload_of(control_plane, namespace, "gang")
    assert wl is not None
    for k in range(2):  # slices of 4 per rack
        assert len({at[i][RACK] for i in range(4 * k, 4 * k + 4)}) == 1, (k, at)
    for j in range(4):  # each of 2 per NVLink domain
        assert len({at[i][CLIQUE] for i in range(2 * j, 2 * j + 2)}) == 1, (j, at)
    assert [at[i][names.LABEL_HOSTNAME] for i in range(8)] == assigned_nodes(wl)
    # The pins travel on the template (the controller's) and become each pod's own affinity.
    job = get(control_plane, "job", "gang", namespace)
    pins = json.loads(job["spec"]["template"]["metadata"]["annotations"][names.ANNOTATION_POD_PINS])
    assert sum(entry[0] for entry in pins["pods"]) == 8

    # Gone, and a balanced gang of 6 takes the two largest racks: 3 and 3, not 4 and 2.
    control_plane.kubectl("delete", "job", "gang", "-n", namespace, "--wait=false")
    wait_for("the gang's pods gone", lambda: not items(control_plane, "pods", namespace))
    balanced = {
        names.ANNOTATION_PODSET_REQUIRED_TOPOLOGY: BLOCK,
        names.ANNOTATION_PODSET_BALANCED_PLACEMENT: "true",
    }
    apply(control_plane, indexed_job("even", namespace, 6, balanced))
    at = placed(control_plane, namespace, "even", 6)
    per_rack: dict[str, int] = {}
    for labels in at.values():
        per_rack[labels[RACK]] = per_rack.get(labels[RACK], 0) + 1
    assert sorted(per_rack.values()) == [3, 3], per_rack
    wl = workload_of(control_plane, namespace, "even")
    assert wl is not None
    assert [at[i][names.LABEL_HOSTNAME] for i in range(6)] == assigned_nodes(wl)
