"""Properties of sliced and balanced placement over random fleets of blocks, racks and NVLink
domains: every slice inside one domain of its level, the whole set inside its outer domain, the
counts add up, no node over what it holds, the same answer whatever the node order, a balanced
spread even wherever capacity allows, and a refusal only when no domain could hold the slices."""

from __future__ import annotations

from dataclasses import dataclass

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_core_slices import BLOCK, LEVELS, NVL, RACK

from queuectl.core import GPU, Node, TopologyAssignment, TopologyRequest
from queuectl.core.topology import node_capacity, place

PROPS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])

CHAINS: list[tuple[tuple[str, int], ...]] = [
    (),
    ((RACK, 1),),
    ((RACK, 2),),
    ((RACK, 4),),
    ((NVL, 3),),
    ((RACK, 4), (NVL, 2)),
    ((RACK, 8), (NVL, 4)),
    ((RACK, 4), (NVL, 1)),
    ((BLOCK, 8), (RACK, 4), (NVL, 2)),
    ((BLOCK, 4), (RACK, 2), (NVL, 1)),
]


@dataclass(frozen=True)
class Case:
    nodes: list[Node]
    order: list[int]
    """Another order of the same nodes."""
    request: TopologyRequest
    count: int


@st.composite
def cases(draw: st.DrawFn) -> Case:
    nodes = []
    for b in range(draw(st.integers(1, 2))):
        for r in range(draw(st.integers(1, 3))):
            for x in range(draw(st.integers(1, 2))):
                for i in range(draw(st.integers(1, 3))):
                    name = f"b{b}-r{r}-x{x}-n{i}"
                    labels = {BLOCK: f"b{b}", RACK: f"b{b}r{r}", NVL: f"b{b}r{r}x{x}"}
                    free = draw(st.integers(0, 8))
                    nodes.append(Node(name, {**labels, LEVELS[3]: name}, {GPU: 8}, {GPU: 8 - free}))
    chain = draw(st.sampled_from(CHAINS))
    outer = draw(st.sampled_from([None, "required", "preferred"]))
    units = draw(st.integers(1, 6))
    count = units * (chain[0][1] if chain else 1)
    request = TopologyRequest(
        required=BLOCK if outer == "required" else None,
        preferred=BLOCK if outer == "preferred" else None,
        slices=chain,
        balanced=draw(st.booleans()),
    )
    order = draw(st.permutations(range(len(nodes))))
    return Case(nodes, list(order), request, count)


def put(nodes: list[Node], request: TopologyRequest, count: int) -> TopologyAssignment | str:
    capacities = {n.name: node_capacity(n) for n in nodes}
    return place(nodes, capacities, {}, LEVELS, request, count, {GPU: 1})


def free(nodes: list[Node]) -> dict[str, int]:
    return {n.name: n.allocatable[GPU] - n.used[GPU] for n in nodes}


def holds(nodes: list[Node], idx: int, size: int) -> dict[tuple[str, ...], int]:
    """Slices of `size` each domain of level `idx` holds (one slice level: pods // size)."""
    pods: dict[tuple[str, ...], int] = {}
    for n in nodes:
        key = tuple(n.labels[lv] for lv in LEVELS[: idx + 1])
        pods[key] = pods.get(key, 0) + n.allocatable[GPU] - n.used[GPU]
    return {k: p // size for k, p in pods.items()}


@PROPS
@given(cases())
def test_slices_stay_whole_counts_add_up_and_no_node_is_overfilled(case: Case) -> None:
    placed = put(case.nodes, case.request, case.count)
    again = put([case.nodes[i] for i in case.order], case.request, case.count)
    assert again == placed  # deterministic, whatever order the nodes come in
    if isinstance(placed, str):
        return
    assert sum(d.count for d in placed.domains) == case.count
    room = free(case.nodes)
    used: dict[str, int] = {}
    for d in placed.domains:
        used[d.nodes[0]] = used.get(d.nodes[0], 0) + d.count
    assert all(used[n] <= room[n] for n in used)
    pods = [d.values for d in placed.domains for _ in range(d.count)]
    for lv, size in case.request.slices:
        depth = LEVELS.index(lv) + 1
        for j in range(0, case.count, size):
            assert len({v[:depth] for v in pods[j : j + size]}) == 1
    if case.request.required:
        assert len({v[:1] for v in pods}) == 1
        assert placed.domain == pods[0][:1]


@PROPS
@given(cases())
def test_a_single_slice_level_is_refused_only_when_no_domain_holds_the_slices(case: Case) -> None:
    if len(case.request.slices) != 1:
        return
    level, size = case.request.slices[0]
    idx = LEVELS.index(level)
    placed = put(case.nodes, case.request, case.count)
    per_domain = holds(case.nodes, idx, size)
    by_block: dict[str, int] = {}
    for key, n in per_domain.items():
        by_block[key[0]] = by_block.get(key[0], 0) + n
    units = case.count // size
    if case.request.required:
        possible = max(by_block.values()) >= units
    else:
        possible = sum(by_block.values()) >= units
    assert isinstance(placed, TopologyAssignment) == possible, placed


@PROPS
@given(cases())
def test_a_balanced_spread_differs_by_at_most_one_slice_unless_a_domain_is_full(
    case: Case,
) -> None:
    if not case.request.balanced or len(case.request.slices) > 1:
        return
    placed = put(case.nodes, case.request, case.count)
    if isinstance(placed, str):
        return
    if case.request.slices:
        lv, size = case.request.slices[0]
        idx = LEVELS.index(lv)
    else:  # one-pod slices at the level below the chosen domain
        size = 1
        idx = LEVELS.index(placed.level) + 1 if placed.level is not None else 0
    cap = holds(case.nodes, idx, size)
    got: dict[tuple[str, ...], int] = {}
    for d in placed.domains:
        key = d.values[: idx + 1]
        got[key] = got.get(key, 0) + d.count
    shares = {k: n // size for k, n in got.items()}
    for a, na in shares.items():
        for b, nb in shares.items():
            if na > nb + 1:
                assert nb == cap[b], (a, na, b, nb, cap[b])
    if placed.note is None:
        assert max(shares.values()) - min(shares.values()) <= 1


@PROPS
@given(cases(), st.data())
def test_freeing_room_never_makes_a_placement_impossible(case: Case, data: st.DataObject) -> None:
    """What lets the victim search check placement once: a gang the nodes hold now, they still
    hold once victims' pods are gone (any of its pods, on any nodes)."""
    if isinstance(put(case.nodes, case.request, case.count), str):
        return
    freed = [
        Node(n.name, n.labels, n.allocatable, {GPU: data.draw(st.integers(0, n.used[GPU]))})
        for n in case.nodes
    ]
    assert not isinstance(put(freed, case.request, case.count), str)
