"""Invariants of a simulation over random small traces: quota is never exceeded, and every job
either finishes, is stopped by its maximum execution time, or is reported as never admitted."""

from __future__ import annotations

from collections.abc import Mapping

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sim_worlds import job, queue, world

from queuectl.sim import Job, SimOptions, parse_nodes, simulate

NOMINAL = {"a": 8, "b": 8, "c": 4}
BORROW = {"a": 8, "b": None, "c": 0}
CONFIG = world(
    queue("a", 8, cohort="org", borrow=8),
    queue("b", 8, cohort="org", lend=4),
    queue("c", 4, cohort="org", borrow=0),
)
NODES = parse_nodes("3x8:gpu", CONFIG)

jobs_strategy = st.lists(
    st.tuples(
        st.sampled_from(sorted(NOMINAL)),
        st.integers(0, 2000),  # submit
        st.sampled_from((1, 2, 4, 8)),  # GPUs per pod
        st.integers(1, 3),  # pods
        st.integers(1, 3000),  # runtime
        st.sampled_from(("low", "grace", "protected", "high")),
        st.sampled_from((0.0, 100.0)),  # checkpoint
        st.sampled_from((None, 500.0)),  # max execution
    ),
    min_size=1,
    max_size=25,
)


def _jobs(raw: list[tuple]) -> tuple[Job, ...]:  # type: ignore[type-arg]
    return tuple(
        job(f"j{i}", s, g, r, team=t, pc=pc, checkpoint=ck, max_exec=mx, pods=p)
        for i, (t, s, g, p, r, pc, ck, mx) in enumerate(raw)
    )


def _within_quota(t: float, usage: Mapping[str, Mapping[str, int]]) -> None:
    held = {cq: sum(flavors.values()) for cq, flavors in usage.items()}
    assert all(v >= 0 for v in held.values()), (t, held)
    assert sum(held.values()) <= sum(NOMINAL.values()), (t, held)
    # b lends at most 4: the others never hold more than their quota plus those 4
    assert held.get("a", 0) + held.get("c", 0) <= NOMINAL["a"] + NOMINAL["c"] + 4, (t, held)
    for cq, limit in BORROW.items():
        if limit is not None:
            assert held.get(cq, 0) <= NOMINAL[cq] + limit, (t, cq, held)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(jobs_strategy, st.sampled_from((0.0, 2.0)))
def test_never_over_quota_and_every_job_is_accounted_for(raw: list, failures: float) -> None:  # type: ignore[type-arg]
    jobs = _jobs(raw)
    result = simulate(
        CONFIG,
        NODES,
        jobs,
        SimOptions(node_failures=failures, repair_seconds=600),
        observe=_within_quota,
    )
    counts = result.summary["jobs"]
    done = counts["finished"] + counts["stopped_max_exec"]  # type: ignore[index]
    assert done + counts["never_admitted"] == len(jobs)  # type: ignore[index]
    # what never fits is reported with the core's reason
    for key, why in result.summary["never_admitted"].items():  # type: ignore[attr-defined]
        assert why, key
