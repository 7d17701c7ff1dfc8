"""Flavors in the queue's order, with fungibility."""

from __future__ import annotations

import pytest
from core_helpers import admitted, gpu_queue, job, quota, scheduler

from queuectl.core import FlavorFungibility, PreemptionPolicy


def test_inference_falls_back_from_h100_to_a100() -> None:
    s = scheduler(
        gpu_queue("infer", quota("h100", 2), quota("a100", 8), cohort=None),
        *(job(f"i/{n}", "infer", 1, created=n) for n in range(4)),
        flavors=("h100", "a100"),
    )
    r = s.run_cycle(1.0)
    flavors = {a.key: a.admission.podsets[0].flavors["nvidia.com/gpu"] for a in r.admitted}
    assert flavors == {"i/0": "h100", "i/1": "h100", "i/2": "a100", "i/3": "a100"}


@pytest.mark.parametrize(
    ("when_can_borrow", "flavor"), [("Borrow", "h100"), ("TryNextFlavor", "a100")]
)
def test_when_can_borrow(when_can_borrow: str, flavor: str) -> None:
    s = scheduler(
        gpu_queue("lender", quota("h100", 8)),
        gpu_queue(
            "q",
            quota("h100", 2),
            quota("a100", 8),
            fungibility=FlavorFungibility(when_can_borrow=when_can_borrow),
        ),  # type: ignore[arg-type]
        job("q/w", "q", 4),
        flavors=("h100", "a100"),
    )
    [a] = s.run_cycle(1.0).admitted
    assert a.admission.podsets[0].flavors["nvidia.com/gpu"] == flavor


@pytest.mark.parametrize(
    ("when_can_preempt", "expect_preemption"), [("Preempt", True), ("TryNextFlavor", False)]
)
def test_when_can_preempt(when_can_preempt: str, expect_preemption: bool) -> None:
    s = scheduler(
        gpu_queue(
            "q",
            quota("h100", 2),
            quota("a100", 8),
            cohort=None,
            preemption=PreemptionPolicy(within_cluster_queue="LowerPriority"),
            fungibility=FlavorFungibility(when_can_preempt=when_can_preempt),
        ),  # type: ignore[arg-type]
        job("q/low", "q", 2, priority=0),
        flavors=("h100", "a100"),
    )
    assert admitted(s.run_cycle(1.0)) == ["q/low"]
    s.upsert_workload(job("q/high", "q", 2, priority=9, created=1))
    r = s.run_cycle(2.0)
    assert bool(r.preemptions) == expect_preemption
    if not expect_preemption:
        [a] = r.admitted
        assert a.admission.podsets[0].flavors["nvidia.com/gpu"] == "a100"


def test_a_gang_gets_every_pod_set_or_nothing() -> None:
    from queuectl.core import GPU, PodSet, Workload

    s = scheduler(gpu_queue("q", quota("h100", 8), cohort=None))
    s.upsert_workload(
        Workload("q/job", "q", (PodSet("driver", 1, {GPU: 2}), PodSet("workers", 4, {GPU: 2})))
    )
    s.upsert_workload(
        Workload(
            "q/fits",
            "q",
            (PodSet("driver", 1, {GPU: 2}), PodSet("workers", 3, {GPU: 2})),
            created=1,
        )
    )
    r = s.run_cycle(1.0)
    assert admitted(r) == ["q/fits"]  # 10 GPUs never fit in 8, even in part
    [a] = r.admitted
    assert [(p.name, p.count, p.usage[GPU]) for p in a.admission.podsets] == [
        ("driver", 1, 2),
        ("workers", 3, 6),
    ]
