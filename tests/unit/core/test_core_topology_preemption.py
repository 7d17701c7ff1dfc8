"""Preemption for a gang that must sit in one domain: victims free that domain, not GPUs here
and there.

Random racks of 8-GPU nodes filled by low-priority work placed by the core (single pods and
small gangs, anywhere), then a high-priority gang that asks for one rack (or slices per rack,
inside one block). Quota is never short (the queue's nominal is the whole fleet): every victim is
taken for room on the nodes. Whenever the core preempts: once the victims are gone the gang is
admitted, and every victim ran on a rack the gang then uses.
"""

from __future__ import annotations

from dataclasses import dataclass

from core_helpers import job
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_core_topology import BLOCK, RACK, cluster

from queuectl.core import (
    GPU,
    PodSet,
    PreemptionPolicy,
    Scheduler,
    TopologyAssignment,
    TopologyRequest,
    Workload,
)

PROPS = settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
LOWER = PreemptionPolicy(within_cluster_queue="LowerPriority")


@dataclass(frozen=True)
class Case:
    racks: dict[str, list[int]]
    fill: list[tuple[int, int]]
    """(pods, GPUs per pod) of the low-priority work, in arrival order."""
    gang: TopologyRequest
    pods: int
    gpus: int


@st.composite
def cases(draw: st.DrawFn) -> Case:
    racks = {
        f"r{r}": [draw(st.sampled_from([0, 0, 2, 8])) for _ in range(draw(st.integers(1, 3)))]
        for r in range(draw(st.integers(2, 4)))
    }
    fill = draw(
        st.lists(st.sampled_from([(1, 1), (1, 2), (1, 4), (2, 2), (2, 4), (1, 8)]), max_size=24)
    )
    shape = draw(st.sampled_from(["required", "sliced"]))
    gpus = draw(st.sampled_from([2, 4, 8]))
    if shape == "required":
        pods = draw(st.integers(1, 3))
        gang = TopologyRequest(required=RACK)
    else:
        size = draw(st.sampled_from([1, 2]))
        pods = size * draw(st.integers(1, 3))
        gang = TopologyRequest(required=BLOCK, slices=((RACK, size),))
    return Case(racks, fill, gang, pods, gpus)


def placed_racks(topo: TopologyAssignment | None) -> set[str]:
    assert topo is not None
    return {d.values[1] for d in topo.domains}


def running_racks(s: Scheduler, admitted: dict[str, TopologyAssignment | None]) -> None:
    for a in s.run_cycle(1.0).admitted:
        admitted[a.key] = a.admission.podsets[0].topology


@PROPS
@given(cases())
def test_victims_free_the_domains_the_gang_then_uses(case: Case) -> None:
    total = 8 * sum(len(nodes) for nodes in case.racks.values())
    s = cluster(case.racks, gpu_quota=total, preemption=LOWER)
    where: dict[str, TopologyAssignment | None] = {}
    for i, (pods, gpus) in enumerate(case.fill):
        s.upsert_workload(job(f"q/low-{i:02}", "q", gpus, pods=pods, created=i))
        running_racks(s, where)
    gang = Workload(
        "q/gang",
        "q",
        (PodSet("main", case.pods, {GPU: case.gpus}, case.gang),),
        priority=100,
        created=100,
    )
    s.upsert_workload(gang)
    first = s.run_cycle(2.0)
    if any(a.key == "q/gang" for a in first.admitted) or not first.preemptions:
        return  # it fitted at once, or no preemption could make room
    victims = [p.victim for p in first.preemptions]
    for v in victims:
        s.delete_workload(v)
    then = s.run_cycle(3.0)
    [admitted] = [a for a in then.admitted if a.key == "q/gang"]  # the gang fits now
    racks = placed_racks(admitted.admission.podsets[0].topology)
    for v in victims:
        assert placed_racks(where[v]) & racks, f"victim {v} ran outside the gang's racks {racks}"


def test_a_rack_gang_frees_one_whole_rack_of_small_jobs_not_gpus_here_and_there() -> None:
    """Two racks of two 8-GPU nodes, all 32 GPUs held by sixteen 2-GPU jobs of low priority.
    A 16-GPU gang that needs one rack preempts exactly the eight jobs of one rack."""
    s = cluster({"r1": [0, 0], "r2": [0, 0]}, gpu_quota=32, preemption=LOWER)
    where: dict[str, TopologyAssignment | None] = {}
    for i in range(16):
        s.upsert_workload(job(f"q/low-{i:02}", "q", 2, created=i))
    running_racks(s, where)
    assert len(where) == 16
    s.upsert_workload(job("q/gang", "q", 8, pods=2, priority=100, created=100, required=RACK))
    victims = [p.victim for p in s.run_cycle(2.0).preemptions]
    assert len(victims) == 8
    assert len({r for v in victims for r in placed_racks(where[v])}) == 1
