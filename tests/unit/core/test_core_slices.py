"""Pod-set slices, several slice levels and balanced placement, as the scheduler decides them.

The fleet: 8-GPU nodes in blocks, racks and NVLink domains; each test says how many GPUs are free
on each node. Every pod asks for one GPU, so free GPUs are free pods.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pytest
from core_helpers import admitted, gpu_queue, quota, scheduler

from queuectl.core import (
    GPU,
    Flavor,
    Node,
    PodSet,
    Topology,
    TopologyAssignment,
    TopologyRequest,
    Workload,
)
from queuectl.core.slices import slice_problem
from queuectl.core.topology import node_capacity, place

BLOCK, RACK, NVL, HOST = (
    "topology.queuectl.io/block",
    "topology.queuectl.io/rack",
    "nvidia.com/gpu.clique",
    "kubernetes.io/hostname",
)
LEVELS = (BLOCK, RACK, NVL, HOST)

Fleet = Mapping[tuple[str, str, str], Sequence[int]]
"""(block, rack, nvlink) -> free GPUs on each of its nodes"""


def nodes_of(fleet: Fleet) -> list[Node]:
    out = []
    for (block, rack, nvl), free in fleet.items():
        for i, f in enumerate(free):
            name = f"{rack}-{nvl}-n{i}"
            labels = {"gpu": "h100", BLOCK: block, RACK: rack, NVL: nvl, HOST: name}
            out.append(Node(name, labels, {GPU: 8}, {GPU: 8 - f}))
    return out


def put(fleet: Fleet, count: int, **request: object) -> TopologyAssignment | str:
    nodes = nodes_of(fleet)
    capacities = {n.name: node_capacity(n) for n in nodes}
    req = TopologyRequest(**request)  # type: ignore[arg-type]
    return place(nodes, capacities, {}, LEVELS, req, count, {GPU: 1})


def per(placed: TopologyAssignment | str, level: str) -> dict[str, int]:
    """Pods per domain of `level`."""
    assert isinstance(placed, TopologyAssignment), placed
    i = LEVELS.index(level)
    out: dict[str, int] = {}
    for d in placed.domains:
        out[d.values[i]] = out.get(d.values[i], 0) + d.count
    return out


def pods_in_order(placed: TopologyAssignment) -> list[tuple[str, ...]]:
    """Each pod's domain values, in the pod order the assignment lists."""
    return [d.values for d in placed.domains for _ in range(d.count)]


# --- slices ---------------------------------------------------------------------------------

SCATTERED = {
    ("b1", "r1", "x"): [3, 3],
    ("b1", "r2", "x"): [3, 3],
    ("b1", "r3", "x"): [4],
}
"""6, 6 and 4 free pods in three racks of one block."""

SLICE_CASES = [
    pytest.param(
        SCATTERED,
        12,
        {"required": BLOCK, "slices": ((RACK, 4),)},
        {"r1": 4, "r2": 4, "r3": 4},
        id="slices of 4 per rack take one slice from each rack, not 6+6",
    ),
    pytest.param(
        SCATTERED,
        12,
        {"required": BLOCK},
        {"r1": 6, "r2": 6},
        id="without slices the same gang packs the first racks full",
    ),
    pytest.param(
        SCATTERED,
        12,
        {"slices": ((RACK, 4),)},
        {"r1": 4, "r2": 4, "r3": 4},
        id="slices with no outer level may use any domains",
    ),
    pytest.param(
        {
            ("b1", "r1", "a"): [4],
            ("b1", "r1", "b"): [3],
            ("b1", "r1", "c"): [3],
            ("b1", "r2", "a"): [4],
            ("b1", "r2", "b"): [4],
            ("b1", "r3", "a"): [2, 2],
            ("b1", "r3", "b"): [4],
            ("b2", "r4", "a"): [8],
            ("b2", "r5", "a"): [3],
        },
        16,
        {"required": BLOCK, "slices": ((RACK, 8), (NVL, 4))},
        {"r2": 8, "r3": 8},
        id="three levels: one block, 8 per rack, 4 per NVLink domain; r1 has 10 free but one "
        "whole NVLink slice",
    ),
    pytest.param(
        {("b1", "r1", "a"): [8], ("b1", "r1", "b"): [8], ("b1", "r2", "a"): [4]},
        8,
        {"required": BLOCK, "slices": ((RACK, 8), (NVL, 4))},
        {"r1": 8},
        id="the smallest rack that holds a slice is not always the smallest in pods",
    ),
    pytest.param(
        {("b1", "r1", "a"): [8, 8], ("b2", "r2", "a"): [8, 8, 8, 8]},
        16,
        {"preferred": BLOCK, "slices": ((RACK, 8),)},
        {"r1": 16},
        id="preferred with slices: the smallest block that holds the slices",
    ),
]


@pytest.mark.parametrize(("fleet", "count", "request_", "by_rack"), SLICE_CASES)
def test_slices_land_whole_in_their_domains(
    fleet: Fleet, count: int, request_: dict[str, object], by_rack: dict[str, int]
) -> None:
    placed = put(fleet, count, **request_)
    assert per(placed, RACK) == by_rack
    assert isinstance(placed, TopologyAssignment)
    assert sum(d.count for d in placed.domains) == count
    order = pods_in_order(placed)
    for lv, size in placed.slices:
        depth = LEVELS.index(lv) + 1
        for j in range(0, count, size):
            assert len({v[:depth] for v in order[j : j + size]}) == 1, (lv, j)


def test_a_64_gpu_gang_in_slices_of_8_per_nvlink_domain_inside_one_block() -> None:
    """The issue's frontier shape: 8 NVLink domains of 2 nodes, 4 free GPUs on most nodes;
    each slice of 8 takes a whole NVLink domain, the gang one block."""
    fleet = {("b1", "r1", f"nv{i}"): [4, 4] for i in range(8)}
    fleet[("b0", "r0", "nv")] = [8, 8, 8, 8]  # another block: too small for the gang
    placed = put(fleet, 64, required=BLOCK, slices=((NVL, 8),))
    assert per(placed, NVL) == {f"nv{i}": 8 for i in range(8)}
    assert isinstance(placed, TopologyAssignment)
    assert placed.level == BLOCK and placed.domain == ("b1",)


@pytest.mark.parametrize(
    ("count", "request_", "problem"),
    [
        (12, {"slices": ((RACK, 5),)}, "12 pods do not make whole slices of 5"),
        (16, {"slices": ((RACK, 8), (NVL, 3))}, "slices of 3 per nvidia.com/gpu.clique do not "),
        (16, {"slices": ((NVL, 8), (RACK, 4))}, "topology.queuectl.io/rack is not inside"),
        (16, {"slices": ((RACK, 8), (RACK, 4))}, "is not inside"),
        (16, {"slices": ((BLOCK, 16), (RACK, 8), (NVL, 4), (HOST, 2))}, "at most 3 are supported"),
        (16, {"slices": (("no/such", 8),)}, "slice level 'no/such' is not one of"),
        (16, {"required": NVL, "slices": ((RACK, 8),)}, "finer than its outermost slice level"),
        (16, {"slices": ((RACK, 0),)}, "must be at least 1"),
    ],
)
def test_a_malformed_slice_request_is_refused_with_what_to_do(
    count: int, request_: dict[str, object], problem: str
) -> None:
    placed = put({("b1", "r1", "a"): [8, 8]}, count, **request_)
    assert isinstance(placed, str)
    assert problem in placed


def test_a_failed_placement_is_explained_level_by_level() -> None:
    fleet = {
        ("b1", "r1", "a"): [4, 3],
        ("b1", "r2", "a"): [3],
        ("b2", "r3", "a"): [4],
        ("b2", "r3", "b"): [4],
    }
    placed = put(fleet, 12, required=BLOCK, slices=((RACK, 4),))
    assert placed == (
        f"no {BLOCK} domain holds 12 pods in slices of 4 per {RACK}; the largest {BLOCK} "
        f"holds 2 slices of 4 pods; the largest {RACK} holds 2 slices of 4 pods; "
        "18 pods fit over all nodes"
    )
    inner = put(fleet, 16, slices=((RACK, 8), (NVL, 4)))
    assert inner == (
        f"the nodes hold 1 slice of 8 pods, not 2 in slices of 8 per {RACK}, slices of 4 per "
        f"{NVL}; the largest {RACK} holds 1 slice of 8 pods; the largest {NVL} holds "
        "1 slice of 4 pods; 18 pods fit over all nodes"
    )


# --- balanced -------------------------------------------------------------------------------

TWO_RACKS = {("b1", "r1", "a"): [5, 5], ("b1", "r2", "a"): [5, 5]}

BALANCED_CASES = [
    pytest.param(
        TWO_RACKS, 12, {"preferred": RACK}, {"r1": 10, "r2": 2}, None, id="packed: 10 and 2"
    ),
    pytest.param(
        TWO_RACKS,
        12,
        {"preferred": RACK, "balanced": True},
        {"r1": 6, "r2": 6},
        None,
        id="balanced: 12 pods over two racks of 10 free are 6 and 6",
    ),
    pytest.param(
        {**TWO_RACKS, ("b1", "r3", "a"): [5, 5]},
        12,
        {"required": BLOCK, "balanced": True},
        {"r1": 6, "r2": 6},
        None,
        id="balanced takes the fewest racks that hold the gang",
    ),
    pytest.param(
        {("b1", "r1", "a"): [5, 5], ("b1", "r2", "a"): [3]},
        12,
        {"required": BLOCK, "balanced": True},
        {"r1": 9, "r2": 3},
        "as r2 holds only 3",
        id="a rack too small for its even share: as even as it allows, and why",
    ),
    pytest.param(
        {**TWO_RACKS, ("b1", "r3", "a"): [5, 5]},
        16,
        {"required": BLOCK, "slices": ((RACK, 2),), "balanced": True},
        {"r1": 8, "r2": 8},
        None,
        id="balanced slices: 8 slices of 2 over two racks are 4 and 4",
    ),
    pytest.param(
        {("b1", "r1", "a"): [5, 5], ("b1", "r2", "a"): [5, 5], ("b1", "r3", "a"): [2]},
        12,
        {"required": BLOCK, "slices": ((RACK, 2),)},
        {"r1": 10, "r3": 2},
        None,
        id="slices packed without balance: the last slice in the smallest rack that holds it",
    ),
]


@pytest.mark.parametrize(("fleet", "count", "request_", "by_rack", "note"), BALANCED_CASES)
def test_balanced_placement_spreads_evenly_over_the_chosen_domains(
    fleet: Fleet,
    count: int,
    request_: dict[str, object],
    by_rack: dict[str, int],
    note: str | None,
) -> None:
    placed = put(fleet, count, **request_)
    assert per(placed, RACK) == by_rack
    assert isinstance(placed, TopologyAssignment)
    if note is None:
        assert placed.note is None
    else:
        assert placed.note is not None and note in placed.note


def test_balance_never_spreads_wider_than_the_fewest_domains_that_hold_the_gang() -> None:
    """A rack is required and one of its NVLink domains holds all 6 pods: they stay there,
    balanced or not; 20 pods need both NVLink domains, and balance makes them 10 and 10."""
    fleet = {("b1", "r1", "a"): [8, 8], ("b1", "r1", "b"): [8, 8]}
    for balanced in (False, True):
        placed = put(fleet, 6, required=RACK, balanced=balanced)
        assert per(placed, NVL) == {"a": 6}
    assert per(put(fleet, 20, required=RACK), NVL) == {"a": 16, "b": 4}
    assert per(put(fleet, 20, required=RACK, balanced=True), NVL) == {"a": 10, "b": 10}


# --- through the scheduler ------------------------------------------------------------------


def test_the_scheduler_admits_a_sliced_gang_and_says_why_one_waits() -> None:
    """Team A asks for 12 GPUs in slices of 4 per rack in one block: it lands one slice per
    rack. A second such gang finds only scattered GPUs and waits, told what each level holds."""
    s = scheduler(
        Flavor("h100", {"gpu": "h100"}, topology_name="fabric"),
        gpu_queue("q", quota("h100", 64), cohort=None),
    )
    s.upsert_topology(Topology("fabric", LEVELS))
    for n in nodes_of(SCATTERED):
        s.upsert_node(n)
    sliced = TopologyRequest(required=BLOCK, slices=((RACK, 4),))
    s.upsert_workload(Workload("q/a", "q", (PodSet("main", 12, {GPU: 1}, sliced),)))
    r = s.run_cycle(1.0)
    assert admitted(r) == ["q/a"]
    topo = r.admitted[0].admission.podsets[0].topology
    assert topo is not None and per(topo, RACK) == {"r1": 4, "r2": 4, "r3": 4}
    s.upsert_workload(Workload("q/b", "q", (PodSet("main", 4, {GPU: 1}, sliced),), created=1))
    assert admitted(s.run_cycle(2.0)) == []
    info = s.pending_info("q/b")
    assert info is not None and info.reason == "TopologyPlacementFailed"
    assert f"the largest {RACK} holds 0 slices of 4 pods" in info.message


def test_a_pod_set_without_slices_has_no_slice_problem_whatever_its_level() -> None:
    levels = ("topology.queuectl.io/block", "topology.queuectl.io/rack")
    assert slice_problem(TopologyRequest(required=levels[1]), levels, 8) is None
    assert slice_problem(TopologyRequest(preferred=levels[0]), levels, 8) is None
