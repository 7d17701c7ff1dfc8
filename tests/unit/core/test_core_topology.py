"""Topology placement: gangs land inside one domain, counted per node."""

from __future__ import annotations

import pytest
from core_helpers import admitted, gpu_queue, job, quota, reason_of, scheduler

from queuectl.core import GPU, Flavor, Node, PreemptionPolicy, Scheduler, Topology

BLOCK, RACK, HOST = (
    "topology.queuectl.io/block",
    "topology.queuectl.io/rack",
    "kubernetes.io/hostname",
)


def cluster(
    racks: dict[str, list[int]],
    gpu_quota: int = 64,
    block_of: dict[str, str] | None = None,
    preemption: PreemptionPolicy | None = None,
) -> Scheduler:
    """Nodes with 8 GPUs each; racks maps rack -> GPUs already used on each of its nodes."""
    s = scheduler(
        Flavor("h100", {"gpu": "h100"}, topology_name="default"),
        gpu_queue("q", quota("h100", gpu_quota), cohort=None, preemption=preemption),
    )
    s.upsert_topology(Topology("default", (BLOCK, RACK, HOST)))
    for rack, used in racks.items():
        for i, u in enumerate(used):
            name = f"{rack}-n{i}"
            block = (block_of or {}).get(rack, "b1")
            s.upsert_node(
                Node(
                    name, {"gpu": "h100", BLOCK: block, RACK: rack, HOST: name}, {GPU: 8}, {GPU: u}
                )
            )
    return s


def placement(s: Scheduler, key: str) -> list[tuple[str, int]]:
    r = s.run_cycle(1.0)
    [a] = [a for a in r.admitted if a.key == key]
    topo = a.admission.podsets[0].topology
    assert topo is not None
    return [(d.nodes[0], d.count) for d in topo.domains]


def test_a_16_gpu_gang_does_not_fit_two_half_free_racks_when_rack_is_required() -> None:
    s = cluster({"r1": [0, 8], "r2": [8, 0]})  # 8 free in each rack: 16 in all
    s.upsert_workload(job("q/gang", "q", 8, pods=2, required=RACK))
    r = s.run_cycle(1.0)
    assert r.admitted == ()
    info = s.pending_info("q/gang")
    assert info is not None and info.reason == "TopologyPlacementFailed"
    assert "no topology.queuectl.io/rack domain has room for 2 pods" in info.message


def test_when_preemption_cannot_make_room_the_reason_still_names_the_closest_domain() -> None:
    """The samples' case: 4 x 8 GPUs in one rack of four nodes, a higher-priority job holds 2
    GPUs there. Preempting is allowed but cannot help, and the user is told which rack came
    closest, not only that no placement exists."""
    lower = PreemptionPolicy(within_cluster_queue="LowerPriority")
    s = cluster({"r1": [0, 0, 0, 0]}, preemption=lower)
    s.upsert_workload(job("q/vip", "q", 2, priority=100))
    assert admitted(s.run_cycle(1.0)) == ["q/vip"]
    s.upsert_workload(job("q/gang", "q", 8, pods=4, priority=10, required=RACK, created=1))
    assert admitted(s.run_cycle(2.0)) == []
    info = s.pending_info("q/gang")
    assert info is not None and info.reason == "TopologyPlacementFailed"
    assert "no topology.queuectl.io/rack domain has room for 4 pods (the largest holds 3" in (
        info.message
    )
    assert info.message.endswith("preempting would not make room")


def test_the_same_gang_fits_the_block_when_rack_is_only_preferred() -> None:
    s = cluster({"r1": [0, 8], "r2": [8, 0]})
    s.upsert_workload(job("q/gang", "q", 8, pods=2, preferred=RACK))
    assert placement(s, "q/gang") == [("r1-n0", 1), ("r2-n1", 1)]


def test_best_fit_takes_the_smallest_rack_that_holds_the_gang() -> None:
    s = cluster({"r1": [0, 0, 0, 0], "r2": [0, 0], "r3": [0]})
    s.upsert_workload(job("q/gang", "q", 8, pods=2, required=RACK))
    assert placement(s, "q/gang") == [("r2-n0", 1), ("r2-n1", 1)]


def test_per_node_free_gpus_count_not_the_sum() -> None:
    s = cluster({"r1": [4, 4, 4]})  # 12 free GPUs, but no node has 8
    s.upsert_workload(job("q/big-pod", "q", 8, pods=1, required=RACK))
    s.run_cycle(1.0)
    assert reason_of(s, "q/big-pod") == "TopologyPlacementFailed"


def test_unhealthy_gpus_are_not_offered() -> None:
    s = cluster({})
    s.upsert_node(
        Node("n", {"gpu": "h100", BLOCK: "b", RACK: "r", HOST: "n"}, {GPU: 8}, healthy_gpus=6)
    )
    s.upsert_workload(job("q/w", "q", 7))
    s.run_cycle(1.0)
    assert reason_of(s, "q/w") == "TopologyPlacementFailed"
    s.upsert_node(Node("n", {"gpu": "h100", BLOCK: "b", RACK: "r", HOST: "n"}, {GPU: 8}))
    assert admitted(s.run_cycle(2.0)) == ["q/w"]  # a node event wakes the parked workload


def test_admitted_gangs_hold_their_nodes() -> None:
    s = cluster({"r1": [0, 0]})
    s.upsert_workload(job("q/one", "q", 8, pods=2, required=RACK))
    s.upsert_workload(job("q/two", "q", 8, pods=1, required=RACK, created=1))
    r = s.run_cycle(1.0)
    assert admitted(r) == ["q/one"]
    assert reason_of(s, "q/two") == "TopologyPlacementFailed"
    s.delete_workload("q/one")
    assert admitted(s.run_cycle(2.0)) == ["q/two"]


@pytest.mark.parametrize("level", [RACK, "no/such-level"])
def test_a_required_level_must_exist_in_the_topology(level: str) -> None:
    s = cluster({"r1": [0]})
    s.upsert_workload(job("q/w", "q", 1, required=level))
    ok = level == RACK
    assert (admitted(s.run_cycle(1.0)) == ["q/w"]) == ok
