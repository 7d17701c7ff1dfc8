"""A workload's GPU use folded from its nodes' reports, and what its queue's idle policy asks."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from queuectl.core.gpuuse import (
    IdleAction,
    IdlePolicy,
    NodeReport,
    Verdict,
    WorkloadUse,
    fold,
    verdict,
)

THIRTY_MIN = IdlePolicy(threshold=5, window_s=1800, action=IdleAction.REQUEUE)


def run(
    reports: list[NodeReport], *, admitted_at: float | None = 0.0, threshold: float | None = 5
) -> WorkloadUse:
    use = WorkloadUse()
    for r in reports:
        folded = fold(use, r, admitted_at=admitted_at, threshold=threshold)
        if folded is not None:
            use = folded[0]
    return use


def windows(node: str, gpus: int, utils: list[float], *, start: float = 0, every: float = 60):
    return [
        NodeReport(node, start + i * every, start + (i + 1) * every, gpus, u)
        for i, u in enumerate(utils)
    ]


def test_a_working_job_counts_its_gpu_seconds_and_use_and_never_idles() -> None:
    use = run(windows("n1", 8, [90, 80, 100]))
    assert use.gpu_seconds == 8 * 180
    assert use.used_gpu_seconds == pytest.approx(8 * 60 * (0.9 + 0.8 + 1.0))
    assert use.idle_since is None and use.utilization == 100 and use.gpus == 8


def test_an_idle_job_idles_from_the_first_idle_window_until_it_works_again() -> None:
    """Team B's job works for a minute, then idles; its idle clock starts at the first idle
    window's start and stops the moment a window shows work."""
    use = run(windows("n1", 2, [50, 1, 0, 2]))
    assert use.idle_since == 60
    assert verdict(use, THIRTY_MIN, now=240) is Verdict.IN_USE  # idle 3 minutes, not 30
    assert run(windows("n1", 2, [50, 1, 0, 2, 40])).idle_since is None


@pytest.mark.parametrize(
    ("action", "idle_for", "expected"),
    [
        (IdleAction.WARN, 1799, Verdict.IN_USE),
        (IdleAction.WARN, 1800, Verdict.IDLE),
        (IdleAction.REQUEUE, 1800, Verdict.STOP),
        (IdleAction.STOP, 3600, Verdict.STOP),
    ],
)
def test_the_policy_acts_once_the_window_is_full(
    action: IdleAction, idle_for: float, expected: Verdict
) -> None:
    use = WorkloadUse(idle_since=1000.0)
    policy = IdlePolicy(threshold=5, window_s=1800, action=action)
    assert verdict(use, policy, now=1000 + idle_for) is expected


def test_without_a_policy_no_idle_clock_runs_but_idle_gpu_seconds_count_at_5_percent() -> None:
    folded = fold(WorkloadUse(), NodeReport("n1", 0, 60, 4, 1.0), admitted_at=0, threshold=None)
    assert folded is not None
    use, counted = folded
    assert use.idle_since is None and verdict(use, None, 10_000) is Verdict.IN_USE
    assert counted.idle_gpu_seconds == 240


def test_a_report_seen_again_adds_nothing() -> None:
    """After a relist or a controller restart the same annotation comes back: not counted."""
    report = NodeReport("n1", 0, 60, 4, 50)
    first = fold(WorkloadUse(), report, admitted_at=0, threshold=5)
    assert first is not None
    assert fold(first[0], report, admitted_at=0, threshold=5) is None


def test_a_missed_report_is_covered_by_the_next_but_a_long_gap_is_not() -> None:
    reports = windows("n1", 2, [50, 50, 50, 50, 50, 50])
    assert run([reports[0], reports[2]]).gpu_seconds == 2 * 180
    assert run([reports[0], reports[5]]).gpu_seconds == 2 * 120  # 4 windows apart: not covered


def test_nothing_before_the_admission_counts_and_a_requeued_job_starts_a_new_idle_clock() -> None:
    """The job idled under its first admission (idle since 0), was requeued and admitted
    again at t=500: the window straddling the admission counts only its part after it, and
    the idle clock starts again from the admission."""
    idle_first_time = WorkloadUse(idle_since=0.0)
    folded = fold(idle_first_time, NodeReport("n1", 480, 540, 2, 0), admitted_at=500, threshold=5)
    assert folded is not None
    use, counted = folded
    assert counted.gpu_seconds == 2 * 40
    assert use.idle_since == 500
    assert fold(WorkloadUse(), NodeReport("n1", 0, 60, 2, 0), admitted_at=500, threshold=5) is None


def test_a_gang_on_two_nodes_is_idle_only_when_its_gpus_are_idle_on_average() -> None:
    """8 GPUs working at 40 % on n1 and 8 idle on n2: 20 % on average, not idle at 5 %; a
    node that stops reporting drops out after three windows."""
    use = run([NodeReport("n1", 0, 60, 8, 40), NodeReport("n2", 0, 60, 8, 0)])
    assert (use.gpus, use.utilization, use.idle_since) == (16, 20, None)
    use = run(
        [
            NodeReport("n1", 0, 60, 8, 40),
            NodeReport("n2", 0, 60, 8, 0),
            *windows("n2", 8, [0, 0, 0, 0], start=60),
        ]
    )
    assert (use.gpus, use.utilization, use.idle_since) == (8, 0, 240)  # n1 gone from 300


@given(
    utils=st.lists(st.floats(0, 100), min_size=1, max_size=30),
    gpus=st.integers(1, 8),
    repeat=st.lists(st.integers(0, 29), max_size=10),
)
def test_gpu_seconds_are_gpus_times_time_however_often_reports_repeat(
    utils: list[float], gpus: int, repeat: list[int]
) -> None:
    """Invariant: consecutive windows, some delivered twice, count each second once; used
    GPU-seconds never exceed GPU-seconds."""
    reports = windows("n1", gpus, utils)
    delivered = [*reports]
    for i in repeat:
        if i < len(reports):
            delivered.insert(delivered.index(reports[i]) + 1, reports[i])
    use = run(delivered)
    assert use.gpu_seconds == pytest.approx(gpus * 60 * len(utils))
    assert use.used_gpu_seconds <= use.gpu_seconds + 1e-6
