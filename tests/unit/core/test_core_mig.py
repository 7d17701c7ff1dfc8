"""MIG slices as quota and placement resources, and flavors whose GPUs are slices.

A MIG profile is an extended resource like any other (`nvidia.com/mig-1g.10gb`): quota is kept in
it and topology placement counts it per node. A flavor with `node_resources` serves
`nvidia.com/gpu` with slices: one requested GPU is one slice on its nodes, which is how a workload
falls back from a whole GPU to a slice (or back) through flavor order.
"""

from __future__ import annotations

import pytest
from core_helpers import admitted

from queuectl.core import (
    GPU,
    ClusterQueue,
    Flavor,
    FlavorQuotas,
    Node,
    PodSet,
    ResourceGroup,
    ResourceQuota,
    Scheduler,
    Topology,
    TopologyRequest,
    Workload,
    fleet,
)

MIG_1G, MIG_3G = "nvidia.com/mig-1g.10gb", "nvidia.com/mig-3g.40gb"
RACK, HOST = "topology.queuectl.io/rack", "kubernetes.io/hostname"


def node(name: str, rack: str, allocatable: dict[str, int], kind: str) -> Node:
    return Node(name, {"pool": kind, RACK: rack, HOST: name}, allocatable)


def world(*flavors: tuple[Flavor, str, int], nodes: tuple[Node, ...]) -> Scheduler:
    """One queue with one resource group; `flavors` are (flavor, quota resource, nominal) in
    the order they are tried."""
    s = Scheduler()
    s.upsert_topology(Topology("default", (RACK, HOST)))
    covered = tuple(dict.fromkeys(res for _, res, _ in flavors))
    quotas = []
    for flavor, res, nominal in flavors:
        s.upsert_flavor(flavor)
        quotas.append(
            FlavorQuotas(
                flavor.name, tuple(ResourceQuota(r, nominal if r == res else 0) for r in covered)
            )
        )
    s.upsert_cluster_queue(ClusterQueue("q", None, (ResourceGroup(covered, tuple(quotas)),)))
    for n in nodes:
        s.upsert_node(n)
    return s


def work(key: str, resource: str, per_pod: int, pods: int = 1, rack: bool = True) -> Workload:
    topo = TopologyRequest(required=RACK) if rack else None
    return Workload(key, "q", (PodSet("main", pods, {resource: per_pod}, topo),), created=len(key))


MIG_FLAVOR = Flavor("h100-mig-1g", {"pool": "mig"}, topology_name="default")


def mig_nodes(*per_node: int) -> tuple[Node, ...]:
    return tuple(node(f"mig-{i}", "r1", {MIG_1G: n}, "mig") for i, n in enumerate(per_node))


def test_a_mig_profile_is_quota_like_any_extended_resource() -> None:
    s = world((Flavor("h100-mig-1g", {"pool": "mig"}), MIG_1G, 3), nodes=mig_nodes(7))
    for i in range(4):
        s.upsert_workload(work(f"q/w{i}", MIG_1G, 1, rack=False))
    r = s.run_cycle(1.0)
    assert admitted(r) == ["q/w0", "q/w1", "q/w2"]
    info = s.pending_info("q/w3")
    assert info is not None and info.resource == MIG_1G


@pytest.mark.parametrize(
    ("free_per_node", "pods", "fits"),
    [
        ((7, 7), 14, True),  # two full nodes of 1g slices
        ((7, 7), 15, False),  # one more than the slices there are
        ((4, 0), 5, False),  # slices are counted per node, not per cluster
    ],
)
def test_topology_placement_counts_mig_slices_per_node_like_gpus(
    free_per_node: tuple[int, ...], pods: int, fits: bool
) -> None:
    s = world((MIG_FLAVOR, MIG_1G, 100), nodes=mig_nodes(*free_per_node))
    s.upsert_workload(work("q/gang", MIG_1G, 1, pods=pods))
    r = s.run_cycle(1.0)
    assert admitted(r) == (["q/gang"] if fits else [])
    if fits:
        topo = r.admitted[0].admission.podsets[0].topology
        assert topo is not None and sum(d.count for d in topo.domains) == pods


def test_a_node_without_the_profile_holds_no_pod_asking_for_it() -> None:
    """A mixed-strategy node that has 3g slices only: 1g pods do not land there."""
    only_3g = node("mig-3g", "r1", {MIG_3G: 2}, "mig")
    s = world((MIG_FLAVOR, MIG_1G, 10), nodes=(only_3g,))
    s.upsert_workload(work("q/small", MIG_1G, 1))
    assert admitted(s.run_cycle(1.0)) == []
    info = s.pending_info("q/small")
    assert info is not None and info.reason == "TopologyPlacementFailed"


FULL = Flavor("h100-full", {"pool": "full"}, topology_name="default")
SLICE = Flavor(
    "h100-mig-3g", {"pool": "mig"}, topology_name="default", node_resources={GPU: MIG_3G}
)


def fallback_world(first: Flavor, second: Flavor) -> Scheduler:
    nodes = (node("full-0", "r1", {GPU: 1}, "full"), node("mig-0", "r2", {MIG_3G: 2}, "mig"))
    return world((first, GPU, 10), (second, GPU, 10), nodes=nodes)


def chosen(s: Scheduler, now: float) -> dict[str, tuple[str, tuple[str, ...]]]:
    out = {}
    for a in s.run_cycle(now).admitted:
        psa = a.admission.podsets[0]
        assert psa.topology is not None
        out[a.key] = (psa.flavors[GPU], tuple(d.nodes[0] for d in psa.topology.domains))
    return out


def test_a_gpu_request_falls_back_from_a_whole_gpu_to_a_slice_when_the_gpus_are_taken() -> None:
    s = fallback_world(FULL, SLICE)
    for i in range(4):
        s.upsert_workload(work(f"q/infer{i}", GPU, 1))
    assert chosen(s, 1.0) == {
        "q/infer0": ("h100-full", ("full-0",)),
        "q/infer1": ("h100-mig-3g", ("mig-0",)),
        "q/infer2": ("h100-mig-3g", ("mig-0",)),
    }
    # The slices are counted on the MIG node in their own name; the whole GPU is not touched.
    assert fleet.free_gpus(s) == {"full-0": 0}
    info = s.pending_info("q/infer3")
    assert info is not None and info.reason == "TopologyPlacementFailed"


def test_the_reverse_order_prefers_a_slice_and_falls_back_to_a_whole_gpu() -> None:
    s = fallback_world(SLICE, FULL)
    for i in range(3):
        s.upsert_workload(work(f"q/infer{i}", GPU, 1))
    assert chosen(s, 1.0) == {
        "q/infer0": ("h100-mig-3g", ("mig-0",)),
        "q/infer1": ("h100-mig-3g", ("mig-0",)),
        "q/infer2": ("h100-full", ("full-0",)),
    }


def test_a_restarted_core_counts_an_admitted_slice_on_the_mig_node() -> None:
    """Rebuilt from the API server (admission in the upsert), the slice is charged to the MIG
    node in the slice's name, so the next fallback sees one slice left, not two."""
    s = fallback_world(FULL, SLICE)
    s.upsert_workload(work("q/a", GPU, 1))
    s.upsert_workload(work("q/b", GPU, 1))
    s.run_cycle(1.0)
    admitted_b = s.workload("q/b")
    assert admitted_b is not None and admitted_b.admission is not None
    fresh = fallback_world(FULL, SLICE)
    fresh.upsert_workload(s.workload("q/a"))  # type: ignore[arg-type]
    fresh.upsert_workload(admitted_b)
    fresh.upsert_workload(work("q/c", GPU, 1))
    fresh.upsert_workload(work("q/d", GPU, 1))
    assert chosen(fresh, 2.0) == {"q/c": ("h100-mig-3g", ("mig-0",))}


def test_gpu_allocation_counts_a_slice_flavor_in_slices() -> None:
    s = fallback_world(FULL, SLICE)
    for i in range(2):
        s.upsert_workload(work(f"q/infer{i}", GPU, 1))
    s.run_cycle(1.0)
    by_flavor = {f.flavor: (f.capacity, f.allocated) for f in fleet.gpu_allocation(s)}
    assert by_flavor == {"h100-full": (1, 1), "h100-mig-3g": (2, 1)}
