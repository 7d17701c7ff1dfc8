"""Percentiles: one definition for samples (nearest rank) and Prometheus's for histograms."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bench.cluster.stats import (
    histogram,
    histogram_delta,
    histogram_ms,
    histogram_quantile,
    percentile,
    spread,
)

HUNDRED = [float(v) for v in range(100, 0, -1)]  # 100 .. 1, unsorted on purpose


@pytest.mark.parametrize(
    ("values", "q", "expected"),
    [
        ([7.0], 0.5, 7.0),
        ([7.0], 0.99, 7.0),
        (HUNDRED, 0.0, 1.0),
        (HUNDRED, 0.5, 50.0),
        (HUNDRED, 0.99, 99.0),
        (HUNDRED, 1.0, 100.0),
        ([1.0, 2.0], 0.5, 1.0),  # the lower middle: half the samples are at or below it
        ([1.0, 2.0, 3.0, 1000.0], 0.99, 1000.0),  # p99 of few samples is their max
    ],
)
def test_percentile_is_the_nearest_rank(values: list[float], q: float, expected: float) -> None:
    assert percentile(values, q) == expected


@pytest.mark.parametrize(("values", "q"), [([], 0.5), ([1.0], 1.5), ([1.0], -0.1)])
def test_percentile_refuses_what_has_no_answer(values: list[float], q: float) -> None:
    with pytest.raises(ValueError, match=r"percentile of no values|within"):
        percentile(values, q)


@given(
    st.lists(st.floats(-1e6, 1e6, allow_nan=False), min_size=1, max_size=200),
    st.floats(0.0, 1.0),
)
def test_a_percentile_is_an_observed_value_with_at_least_q_of_the_samples_at_or_below_it(
    values: list[float], q: float
) -> None:
    p = percentile(values, q)
    assert p in values
    assert sum(1 for v in values if v <= p) >= q * len(values)
    assert sum(1 for v in values if v < p) < max(1.0, q * len(values))


def test_spread_of_samples_and_of_none() -> None:
    assert spread([]) == {}
    assert spread([2.0, 4.0]) == {"avg": 3.0, "p50": 2.0, "p95": 4.0, "p99": 4.0, "max": 4.0}


CYCLE = "queuectl_scheduling_cycle_duration_seconds"


def scrape(counts: dict[str, float], total: float) -> str:
    """A /metrics text with the cycle histogram (cumulative counts by `le`) among other series."""
    lines = [
        "# HELP queuectl_scheduling_cycle_duration_seconds Wall time of one core scheduling cycle.",
        "# TYPE queuectl_scheduling_cycle_duration_seconds histogram",
    ]
    lines += [f'{CYCLE}_bucket{{le="{le}"}} {n}' for le, n in counts.items()]
    lines += [
        f"{CYCLE}_count {counts['+Inf']}",
        f"{CYCLE}_sum {total}",
        'queuectl_admissions_per_cycle_bucket{le="1.0"} 999.0',
    ]
    return "\n".join(lines) + "\n"


BEFORE = scrape({"0.01": 10, "0.05": 10, "0.1": 10, "+Inf": 10}, 0.05)
AFTER = scrape({"0.01": 10, "0.05": 60, "0.1": 110, "+Inf": 110}, 6.05)


def test_a_histogram_is_read_from_its_own_bucket_lines_only() -> None:
    assert histogram(BEFORE, CYCLE) == [(0.01, 10.0), (0.05, 10.0), (0.1, 10.0), (math.inf, 10.0)]
    assert histogram(BEFORE, "queuectl_missing_seconds") == []


def test_a_labelled_histogram_reads_as_one() -> None:
    text = (
        'h_bucket{cluster_queue="a",le="1"} 1\nh_bucket{cluster_queue="a",le="+Inf"} 2\n'
        'h_bucket{cluster_queue="b",le="1"} 3\nh_bucket{cluster_queue="b",le="+Inf"} 3\n'
    )
    assert histogram(text, "h") == [(1.0, 4.0), (math.inf, 5.0)]


@pytest.mark.parametrize(
    ("buckets", "q", "expected"),
    [
        # 100 observations: 50 in (0.05, 0.1], 50 in (0.1, 0.25]
        ([(0.05, 0), (0.1, 50), (0.25, 100), (math.inf, 100)], 0.5, 0.1),
        ([(0.05, 0), (0.1, 50), (0.25, 100), (math.inf, 100)], 0.99, 0.247),
        ([(0.05, 0), (0.1, 50), (0.25, 100), (math.inf, 100)], 0.25, 0.075),
        ([(0.01, 4), (math.inf, 4)], 0.5, 0.005),  # the first bucket starts at 0
        ([(0.01, 0), (2.5, 1), (math.inf, 10)], 0.99, 2.5),  # in +Inf: the largest bound
        ([(0.01, 0), (math.inf, 0)], 0.5, None),  # no observations
        ([], 0.5, None),
    ],
)
def test_histogram_quantile_interpolates_as_prometheus_does(
    buckets: list[tuple[float, float]], q: float, expected: float | None
) -> None:
    got = histogram_quantile(buckets, q)
    assert got == expected if expected is None else got == pytest.approx(expected)


def test_only_what_was_observed_between_two_scrapes_counts() -> None:
    delta = histogram_delta(histogram(BEFORE, CYCLE), histogram(AFTER, CYCLE))
    assert delta == [(0.01, 0.0), (0.05, 50.0), (0.1, 100.0), (math.inf, 100.0)]
    figures = histogram_ms(BEFORE, AFTER, CYCLE)
    assert figures["count"] == 100
    assert figures["total_s"] == pytest.approx(6.0)
    assert figures["avg"] == pytest.approx(60.0)
    assert figures["p50"] == pytest.approx(50.0)  # the 50th cycle ends the (10, 50] ms bucket
    assert figures["p99"] == pytest.approx(99.0)  # 50 ms + 50 ms x 49/50


def test_no_cycles_between_the_scrapes_gives_no_figures() -> None:
    figures = histogram_ms(BEFORE, BEFORE, CYCLE)
    assert figures["count"] == 0
    assert figures["p50"] is None and figures["avg"] is None
