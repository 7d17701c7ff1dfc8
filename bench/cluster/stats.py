"""Percentiles of samples and of Prometheus histograms. Pure: numbers in, numbers out.

One definition for every figure in a result, so p50/p99 mean the same thing everywhere:
a sample percentile is the nearest-rank one (the smallest value with at least q of the samples
at or below it: always a value that was observed); a histogram percentile is Prometheus's
`histogram_quantile` (linear interpolation inside the bucket that holds the rank), because a
histogram keeps no samples.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence

Buckets = list[tuple[float, float]]
"""(upper bound `le`, cumulative count) pairs, ascending by bound, the last one +Inf."""


def percentile(values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile, q in [0, 1]; raises ValueError on no values."""
    if not values:
        raise ValueError("percentile of no values")
    if not 0.0 <= q <= 1.0:
        raise ValueError(f"q must be within [0, 1], got {q}")
    ordered = sorted(values)
    rank = max(1, math.ceil(q * len(ordered)))
    return ordered[rank - 1]


def spread(values: Sequence[float]) -> dict[str, float]:
    """avg, p50, p95, p99 and max of samples; {} when there are none."""
    if not values:
        return {}
    return {
        "avg": sum(values) / len(values),
        "p50": percentile(values, 0.50),
        "p95": percentile(values, 0.95),
        "p99": percentile(values, 0.99),
        "max": max(values),
    }


_BUCKET = re.compile(r"^(?P<name>[a-zA-Z_:][\w:]*)_bucket\{(?P<labels>[^}]*)\}\s+(?P<value>\S+)")
_LE = re.compile(r'le="([^"]*)"')


def histogram(metrics_text: str, name: str) -> Buckets:
    """The cumulative buckets of histogram `name` in a /metrics text, summed over its other
    labels (so a labelled histogram reads as one); [] when it is absent."""
    by_bound: dict[float, float] = {}
    for line in metrics_text.splitlines():
        m = _BUCKET.match(line)
        if m is None or m.group("name") != name:
            continue
        le = _LE.search(m.group("labels"))
        if le is None:
            continue
        bound = math.inf if le.group(1) == "+Inf" else float(le.group(1))
        by_bound[bound] = by_bound.get(bound, 0.0) + float(m.group("value"))
    return sorted(by_bound.items())


def histogram_delta(before: Buckets, after: Buckets) -> Buckets:
    """What was observed between two scrapes of the same histogram (a counter never drops,
    so a bucket missing before counts from zero)."""
    earlier = dict(before)
    return [(bound, count - earlier.get(bound, 0.0)) for bound, count in after]


def histogram_quantile(buckets: Buckets, q: float) -> float | None:
    """Prometheus's histogram_quantile: None without observations; a rank that falls in the
    +Inf bucket gives the largest finite bound (the histogram cannot say more)."""
    if not buckets or buckets[-1][1] <= 0:
        return None
    total = buckets[-1][1]
    rank = q * total
    lower_bound, lower_count = 0.0, 0.0
    for bound, count in buckets:
        if count >= rank:
            if math.isinf(bound):
                return lower_bound
            if count == lower_count:
                return bound
            share = (rank - lower_count) / (count - lower_count)
            return lower_bound + (bound - lower_bound) * share
        lower_bound, lower_count = bound, count
    return lower_bound


def series_sum(metrics_text: str, name: str) -> float:
    """The sum of every sample of series `name` (any labels) in a /metrics text; 0 if absent."""
    total = 0.0
    for line in metrics_text.splitlines():
        if line.startswith(name) and line[len(name) : len(name) + 1] in ("{", " "):
            total += float(line.rsplit(" ", 1)[1])
    return total


def histogram_ms(before: str, after: str, name: str) -> dict[str, float | int | None]:
    """p50/p99 (bucket-interpolated), average and count of a seconds histogram between two
    scrapes, in milliseconds."""
    buckets = histogram_delta(histogram(before, name), histogram(after, name))
    count = series_sum(after, f"{name}_count") - series_sum(before, f"{name}_count")
    total = series_sum(after, f"{name}_sum") - series_sum(before, f"{name}_sum")
    p50, p99 = histogram_quantile(buckets, 0.50), histogram_quantile(buckets, 0.99)
    return {
        "p50": None if p50 is None else p50 * 1000.0,
        "p99": None if p99 is None else p99 * 1000.0,
        "avg": total / count * 1000.0 if count > 0 else None,
        "count": round(count),
        "total_s": total,
    }
