"""A pool for sliced placement: one block, three racks of four 8-GPU nodes, NVLink domains of
two nodes (`nvidia.com/gpu.clique`), and what a test reads back: each pod's node by its index,
and the nodes the core chose, in pod order."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from e2e.harness import (
    POOL,
    apply,
    cluster_queue,
    flavor,
    get,
    in_pool,
    local_queue,
    pool_taint,
    topology,
    wait_for,
)
from queuectl.api import names
from queuectl.testenv.cluster import Cluster
from queuectl.testenv.nodes import H100

CLIQUE = names.LABEL_GPU_CLIQUE
RACK = names.LABEL_TOPOLOGY_RACK
BLOCK = names.LABEL_TOPOLOGY_BLOCK
Obj = dict[str, Any]


def sliced_pool(cluster: Cluster, namespace: str, prefix: str) -> list[str]:
    """12 tainted nodes of the test's own (3 racks of 4), NVLink domains of 2 nodes, a
    block/rack/clique/host Topology over them, a ClusterQueue of 96 GPUs and LocalQueue `lq`.
    Returns the nodes' names, rack by rack."""
    nodes = cluster.add_gpu_nodes(
        12,
        racks_per_block=3,
        name_prefix=prefix,
        labels={POOL: prefix},
        taints=[pool_taint(prefix)],
    )
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
    return [n.name for n in nodes]


def occupy(cluster: Cluster, namespace: str, node: str, prefix: str) -> None:
    """A pod of nobody's queue taking all 8 GPUs of `node` (bound there by name): the core counts
    it, kube-scheduler sees the rest of its rack free."""
    gpus = {names.GPU_RESOURCE: "8"}
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": f"occupant-{node}", "namespace": namespace},
        "spec": {
            "nodeName": node,
            "tolerations": [{**pool_taint(prefix), "operator": "Equal"}],
            "terminationGracePeriodSeconds": 0,
            "containers": [
                {
                    "name": "main",
                    "image": "registry.k8s.io/pause:3.10",
                    "resources": {"requests": gpus, "limits": gpus},
                }
            ],
        },
    }
    apply(cluster, pod)
    wait_for(
        f"the occupant of {node} running",
        lambda: (
            (get(cluster, "pod", f"occupant-{node}", namespace).get("status") or {}).get("phase")
            == "Running"
        ),
    )


def placed(
    cluster: Cluster, pods: Callable[[], list[Obj]], count: int, index: Callable[[Obj], int]
) -> dict[int, dict[str, str]]:
    """Pod index (`index(pod)`) -> its node's labels, once `count` of `pods()` run."""

    def running() -> list[Obj]:
        return [p for p in pods() if (p.get("status") or {}).get("phase") == "Running"]

    up = wait_for(f"{count} pods running", lambda: len(p := running()) == count and p, timeout=90)
    out = {}
    for pod in up:
        node = get(cluster, "node", pod["spec"]["nodeName"])
        out[index(pod)] = dict(node["metadata"]["labels"])
    return out


def assigned_nodes(wl: Obj) -> list[str]:
    """The nodes the core chose, one per pod in pod order (the status lists them so)."""
    [psa] = wl["status"]["admission"]["podSetAssignments"]
    out = []
    for domain in psa["topologyAssignment"]["domains"]:
        out += [domain["values"][-1]] * int(domain["count"])
    return out


def assert_slices(at: dict[int, dict[str, str]], *slices: tuple[str, int]) -> None:
    """Pods [j*size, (j+1)*size) share one domain of `level`, for each (level, size)."""
    for level, size in slices:
        for j in range(len(at) // size):
            domains = {at[i][level] for i in range(j * size, (j + 1) * size)}
            assert len(domains) == 1, (level, j, {i: at[i][level] for i in sorted(at)})
