"""The log of quota that finished work returned to a tree: sums over any recent window."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as hs

from queuectl.core.freedlog import FreedLog

GPU = ("h100", "nvidia.com/gpu")
CPU = ("h100", "cpu")


def test_since_sums_what_came_back_at_or_after_a_time() -> None:
    log = FreedLog()
    log.add(1.0, {GPU: 2})
    log.add(2.0, {GPU: 1, CPU: 4})
    log.add(5.0, {GPU: 3})
    assert log.since(0.0) == {GPU: 6, CPU: 4}
    assert log.since(2.0) == {GPU: 4, CPU: 4}
    assert log.since(2.5) == {GPU: 3}
    assert log.since(6.0) == {}


def test_pruned_entries_no_longer_count_and_an_empty_log_says_so() -> None:
    log = FreedLog()
    log.add(1.0, {GPU: 2})
    log.add(2.0, {GPU: 1})
    assert not log.prune(1.5)
    assert log.since(0.0) == {GPU: 1}
    assert log.prune(3.0)


@given(
    hs.lists(hs.tuples(hs.integers(0, 5), hs.integers(1, 4)), max_size=300),
    hs.integers(0, 400),
    hs.integers(0, 400),
)
def test_any_window_equals_a_plain_sum(steps: list[tuple[int, int]], horizon: int, t: int) -> None:
    log, now, entries = FreedLog(), 0.0, []
    for gap, n in steps:
        now += gap
        log.add(now, {GPU: n})
        entries.append((now, n))
    if log.prune(float(horizon)):
        assert all(at < horizon for at, _ in entries)
        return
    expected = sum(n for at, n in entries if at >= max(t, horizon))
    assert log.since(float(t)).get(GPU, 0) == expected
