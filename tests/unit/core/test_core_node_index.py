"""The placement index kept between evaluations answers exactly as a plain walk of the nodes.

Random fleets of blocks, racks and NVLink domains (some nodes missing a label, some with other
pods on them, some with a pods limit), random requests (required, preferred, slices up to three
levels, balanced, none), then random usage changes logged as admissions and releases would log
them: after each, the index (caught up from the log, answers memoised) and `topology.place` on
the same usage give the same placement or the same message.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from core_helpers import job
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_core_slices import BLOCK, LEVELS, NVL, RACK
from test_core_topology import cluster, placement

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
)
from queuectl.core.node_index import MAX_INDEXES, ChangeLog, ShapeIndex, place_indexed
from queuectl.core.topology import NodeUse, add_use, node_capacity, place

PROPS = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])

CHAINS: list[tuple[tuple[str, int], ...]] = [
    (),
    ((RACK, 1),),
    ((RACK, 2),),
    ((NVL, 3),),
    ((LEVELS[3], 2),),
    ((RACK, 4), (NVL, 2)),
    ((RACK, 4), (NVL, 1)),
    ((BLOCK, 8), (RACK, 4), (NVL, 2)),
]


@dataclass(frozen=True)
class Case:
    nodes: list[Node]
    requests: list[tuple[TopologyRequest | None, int]]
    steps: list[list[tuple[str, int, int]]]
    """Usage changes, one batch per step: (node, cpu, pods) added (negative: taken away)."""
    per_pod: dict[str, int]


@st.composite
def requests(draw: st.DrawFn) -> tuple[TopologyRequest | None, int]:
    chain = draw(st.sampled_from(CHAINS))
    outer = draw(st.sampled_from([None, "required", "preferred"]))
    level = draw(st.sampled_from(LEVELS[:3]))
    units = draw(st.integers(1, 6))
    count = units * (chain[0][1] if chain else 1)
    if not chain and outer is None and draw(st.booleans()):
        return None, count
    request = TopologyRequest(
        required=level if outer == "required" else None,
        preferred=level if outer == "preferred" else None,
        slices=chain,
        balanced=draw(st.booleans()),
    )
    return request, count


@st.composite
def cases(draw: st.DrawFn) -> Case:
    nodes = []
    for b in range(draw(st.integers(1, 2))):
        for r in range(draw(st.integers(1, 3))):
            for x in range(draw(st.integers(1, 2))):
                for i in range(draw(st.integers(1, 3))):
                    name = f"b{b}-r{r}-x{x}-n{i}"
                    labels = {BLOCK: f"b{b}", RACK: f"b{b}r{r}", NVL: f"b{b}r{r}x{x}"}
                    if draw(st.integers(0, 9)) == 0:  # now and then a node lacks a level
                        del labels[draw(st.sampled_from([BLOCK, RACK, NVL]))]
                    allocatable = {"cpu": 8_000}
                    if draw(st.booleans()):
                        allocatable["pods"] = draw(st.integers(0, 6))
                    other = {"cpu": draw(st.sampled_from([0, 0, 1_000, 4_000, 8_000]))}
                    nodes.append(Node(name, {**labels, LEVELS[3]: name}, allocatable, other))
    names = [n.name for n in nodes]
    change = st.tuples(
        st.sampled_from(names), st.sampled_from([-2_000, -1_000, 1_000, 2_000]), st.integers(-1, 2)
    )
    steps = draw(st.lists(st.lists(change, min_size=0, max_size=4), min_size=1, max_size=5))
    reqs = draw(st.lists(requests(), min_size=1, max_size=4))
    per_pod = {"cpu": draw(st.sampled_from([500, 1_000, 3_000]))}
    return Case(nodes, reqs, steps, per_pod)


@PROPS
@given(cases())
def test_the_index_places_as_a_plain_walk_through_usage_changes(case: Case) -> None:
    capacities = {n.name: node_capacity(n) for n in case.nodes}
    used: NodeUse = {}
    log = ChangeLog()
    index = ShapeIndex(case.nodes, capacities, LEVELS, case.per_pod, used, log)
    for step in [[], *case.steps]:
        for name, cpu, pods in step:
            change = {name: {"cpu": cpu, "pods": pods}}
            add_use(used, change)
            log.add(change)
        index.refresh(used, log, {})
        for request, count in case.requests * 2:  # the second round answers from the memo
            plain = place(case.nodes, capacities, used, LEVELS, request, count, case.per_pod)
            assert place_indexed(index, request, count) == plain


def test_an_index_further_behind_than_the_log_keeps_counts_every_node_again() -> None:
    """Two racks of one node each; the index looks away while the log is dropped and rack r0's
    node fills up: it must still see r0 full, not the room it last counted."""
    nodes = [
        Node(f"n{r}", {BLOCK: "b", RACK: f"r{r}", NVL: f"x{r}", LEVELS[3]: f"n{r}"}, {"cpu": 4})
        for r in range(2)
    ]
    capacities = {n.name: node_capacity(n) for n in nodes}
    used: NodeUse = {}
    log = ChangeLog()
    index = ShapeIndex(nodes, capacities, LEVELS, {"cpu": 1}, used, log)
    want = TopologyRequest(required=RACK)
    first = place_indexed(index, want, 4)
    assert not isinstance(first, str) and first.domain == ("b", "r0")
    add_use(used, {"n0": {"cpu": 4}})
    for _ in range(ChangeLog.KEEP // 2 + 1):  # far more changes than the log keeps
        log.add(["n0", "n1"])
    index.refresh(used, log, {})
    again = place_indexed(index, want, 4)
    assert not isinstance(again, str) and again.domain == ("b", "r1")


def test_a_stream_of_pod_shapes_keeps_a_bounded_number_of_indexes() -> None:
    """Every workload asks for a different amount of cpu per pod: each shape has its own index,
    and the scheduler keeps only the most recently used, whatever the number of shapes."""
    s = Scheduler()
    s.upsert_topology(Topology("t", LEVELS))
    s.upsert_flavor(Flavor("f", topology_name="t"))
    s.upsert_cluster_queue(
        ClusterQueue(
            "q",
            None,
            (ResourceGroup(("cpu",), (FlavorQuotas("f", (ResourceQuota("cpu", 10**9),)),)),),
        )
    )
    labels = {BLOCK: "b", RACK: "r", NVL: "x", LEVELS[3]: "n"}
    s.upsert_node(Node("n", labels, {"cpu": 10**9}))
    shapes = MAX_INDEXES + 10
    for i in range(shapes):
        request = TopologyRequest(required=RACK)
        s.upsert_workload(Workload(f"ns/w{i}", "q", (PodSet("p", 1, {"cpu": 1 + i}, request),)))
    assert len(s.run_cycle(1.0).admitted) == shapes
    assert len(s.state.cache.placement) == MAX_INDEXES


def test_foreign_pods_coming_and_going_move_the_next_gang() -> None:
    """Rack r0 (two nodes) is the best fit for gangs of two 4-GPU pods, r1 (three nodes) the
    spare. Gang a takes r0-n0; other pods then fill r0-n1 (the Node is fed again, same labels):
    gang b goes to r1. They leave: gang c is back on r0-n1."""
    s = cluster({"r0": [0, 0], "r1": [0, 0, 0]})
    s.upsert_workload(job("q/a", "q", 4, pods=2, required=RACK))
    assert placement(s, "q/a") == [("r0-n0", 2)]
    s.upsert_node(replace(s.nodes()["r0-n1"], used={GPU: 8}))
    s.upsert_workload(job("q/b", "q", 4, pods=2, required=RACK, created=1))
    assert placement(s, "q/b") == [("r1-n0", 2)]
    s.upsert_node(replace(s.nodes()["r0-n1"], used={GPU: 0}))
    s.upsert_workload(job("q/c", "q", 4, pods=2, required=RACK, created=2))
    assert placement(s, "q/c") == [("r0-n1", 2)]
