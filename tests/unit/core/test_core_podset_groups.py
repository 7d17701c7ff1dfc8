"""Pod-set groups: a training job's master and workers that name one podSetGroupName land in the
same rack, even where each alone would best fit a different one."""

from __future__ import annotations

import pytest
from core_helpers import admitted, job
from hypothesis import given, settings
from hypothesis import strategies as st
from test_core_topology import BLOCK, HOST, RACK, cluster

from queuectl.core import GPU, Node, PreemptionPolicy, Scheduler
from queuectl.core.types import PodSet, TopologyRequest, Workload


def pytorch_job(
    key: str,
    *,
    master_gpus: int = 2,
    workers: int = 2,
    group: str | None = "train",
    worker_level: str = RACK,
    priority: int = 0,
) -> Workload:
    """A master pod and `workers` 8-GPU worker pods, each pod set asking for one rack."""
    return Workload(
        key,
        "q",
        (
            PodSet("master", 1, {GPU: master_gpus}, TopologyRequest(RACK, group=group)),
            PodSet("worker", workers, {GPU: 8}, TopologyRequest(worker_level, group=group)),
        ),
        priority=priority,
    )


def racks_of(s: Scheduler, key: str, now: float = 1.0) -> dict[str, set[str]]:
    r = s.run_cycle(now)
    [a] = [a for a in r.admitted if a.key == key]
    out: dict[str, set[str]] = {}
    for ps in a.admission.podsets:
        assert ps.topology is not None
        out[ps.name] = {d.nodes[0].rsplit("-n", 1)[0] for d in ps.topology.domains}
    return out


# r1: one node with 2 free GPUs (the master's best fit alone); r2: three idle 8-GPU nodes.
HALF_FREE_AND_IDLE = {"r1": [6], "r2": [0, 0, 0]}


def test_master_and_workers_of_one_group_share_a_rack_the_master_alone_would_not_pick() -> None:
    s = cluster(HALF_FREE_AND_IDLE)
    s.upsert_workload(pytorch_job("q/ddp"))
    assert racks_of(s, "q/ddp") == {"master": {"r2"}, "worker": {"r2"}}


def test_without_a_group_each_pod_set_takes_its_own_best_fit() -> None:
    s = cluster(HALF_FREE_AND_IDLE)
    s.upsert_workload(pytorch_job("q/ddp", group=None))
    assert racks_of(s, "q/ddp") == {"master": {"r1"}, "worker": {"r2"}}


@pytest.mark.parametrize(
    ("racks", "w", "fragments"),
    [
        (  # 16 GPUs per rack: 2 + 2 x 8 = 18 fits none
            {"r1": [0, 0], "r2": [0, 0]},
            pytorch_job("q/ddp"),
            [
                "no topology.queuectl.io/rack domain has room for pod-set group train",
                "(3 pods of 2 pod sets)",
            ],
        ),
        (  # members asking for different levels are told to ask for one
            HALF_FREE_AND_IDLE,
            pytorch_job("q/ddp", worker_level="topology.queuectl.io/block"),
            [
                "pod sets master, worker of pod-set group train ask for different",
                "give every member the same required (or preferred) level",
            ],
        ),
    ],
)
def test_a_group_that_cannot_be_placed_together_waits_and_says_why(
    racks: dict[str, list[int]], w: Workload, fragments: list[str]
) -> None:
    s = cluster(racks)
    s.upsert_workload(w)
    assert s.run_cycle(1.0).admitted == ()
    info = s.pending_info("q/ddp")
    assert info is not None and info.reason == "TopologyPlacementFailed"
    for fragment in fragments:
        assert fragment in info.message


def test_a_preempting_group_clears_a_rack_that_holds_all_its_members() -> None:
    """r2 runs `low` (priority 0) and has no other free node; r1 runs `mid` (priority 5) and
    has one free node. The group (a 2-GPU master, one 8-GPU worker: two nodes) fits no rack.
    Taking `low` would free a node in r2, enough for the worker alone with the master in r1,
    but not for both in one rack: the group takes `mid` and r1 instead."""
    lower = PreemptionPolicy(within_cluster_queue="LowerPriority")
    s = cluster({"r2": [8, 0]}, preemption=lower)
    s.upsert_workload(job("q/low", "q", 8, required=RACK))
    assert admitted(s.run_cycle(1.0)) == ["q/low"]
    for i in range(2):
        name = f"r1-n{i}"
        s.upsert_node(Node(name, {"gpu": "h100", BLOCK: "b1", RACK: "r1", HOST: name}, {GPU: 8}))
    s.upsert_workload(job("q/mid", "q", 8, priority=5, required=RACK, created=1))
    assert admitted(s.run_cycle(2.0)) == ["q/mid"]
    s.upsert_workload(pytorch_job("q/ddp", workers=1, priority=10))
    r = s.run_cycle(3.0)
    assert [p.victim for p in r.preemptions] == ["q/mid"]


@pytest.mark.parametrize("group", ["train", None])
def test_a_one_pod_set_group_places_as_before(group: str | None) -> None:
    s = cluster({"r1": [0, 0, 0, 0], "r2": [0, 0], "r3": [0]})
    w = Workload("q/gang", "q", (PodSet("main", 2, {GPU: 8}, TopologyRequest(RACK, group=group)),))
    s.upsert_workload(w)
    assert racks_of(s, "q/gang") == {"main": {"r2"}}


@settings(max_examples=150, deadline=None)
@given(
    racks=st.dictionaries(
        st.sampled_from(["r1", "r2", "r3"]),
        st.lists(st.integers(0, 8), min_size=1, max_size=3),
        min_size=1,
    ),
    jobs=st.lists(
        st.tuples(st.integers(1, 8), st.integers(1, 3), st.integers(1, 8)), min_size=1, max_size=4
    ),
)
def test_every_admitted_group_lies_in_one_rack_and_no_node_is_overfilled(
    racks: dict[str, list[int]], jobs: list[tuple[int, int, int]]
) -> None:
    s = cluster(racks)
    for i, (master, workers, worker_gpus) in enumerate(jobs):
        s.upsert_workload(
            Workload(
                f"q/j{i}",
                "q",
                (
                    PodSet("master", 1, {GPU: master}, TopologyRequest(RACK, group="g")),
                    PodSet("worker", workers, {GPU: worker_gpus}, TopologyRequest(RACK, group="g")),
                ),
                created=float(i),
            )
        )
    used = {f"{rack}-n{i}": u for rack, us in racks.items() for i, u in enumerate(us)}
    for a in s.run_cycle(1.0).admitted:
        homes = set()
        for ps in a.admission.podsets:
            assert ps.topology is not None
            for d in ps.topology.domains:
                homes.add(d.nodes[0].rsplit("-n", 1)[0])
                used[d.nodes[0]] += d.count * ps.usage[GPU] // ps.count
        assert len(homes) == 1, (a.key, homes)
    assert all(u <= 8 for u in used.values()), used
