"""GPU-hours and their cost for chargeback: held intervals clipped to a window, priced per flavor.

One pricing rule everywhere a report is computed: a flavor's GPU-hours are priced at its
price *now* (when the report runs). A price change therefore re-prices history in reports;
the Prometheus cost counter, which adds as time passes, keeps the price each second was
charged at. Flavors without a price cost nothing, and costs in different currencies are never
added together (a row is per currency).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Final, Literal

SECONDS_PER_HOUR: Final = 3600.0

GroupBy = Literal["namespace", "clusterqueue", "flavor", "workload"]
GROUP_BYS: Final[tuple[GroupBy, ...]] = ("namespace", "clusterqueue", "flavor", "workload")


@dataclass(frozen=True, slots=True)
class Price:
    """What one GPU-hour on a flavor costs."""

    per_gpu_hour: float
    currency: str


@dataclass(frozen=True, slots=True)
class Held:
    """GPUs of one flavor held by one workload from `start` to `end` (seconds since the epoch)."""

    namespace: str
    workload: str
    cluster_queue: str
    flavor: str
    gpus: float
    start: float
    end: float


@dataclass(frozen=True, slots=True)
class Row:
    """One line of a chargeback report."""

    key: str
    gpu_hours: float
    cost: float
    currency: str
    """Empty where nothing in the row has a price."""


def overlap(start: float, end: float, since: float, until: float) -> float:
    """Seconds of [start, end] inside [since, until] (0 when they do not meet)."""
    return max(0.0, min(end, until) - max(start, since))


def gpu_seconds(held: Held, since: float, until: float) -> float:
    """GPU-seconds of one interval inside the window."""
    return held.gpus * overlap(held.start, held.end, since, until)


def cost_of(gpu_secs: float, price: Price | None) -> float:
    """The cost of some GPU-seconds at a price (0 without one)."""
    if price is None:
        return 0.0
    return gpu_secs / SECONDS_PER_HOUR * price.per_gpu_hour


def _key(held: Held, by: GroupBy) -> str:
    if by == "namespace":
        return held.namespace
    if by == "clusterqueue":
        return held.cluster_queue
    if by == "flavor":
        return held.flavor
    return f"{held.namespace}/{held.workload}"


def report(
    intervals: Iterable[Held],
    prices: Mapping[str, Price],
    by: GroupBy,
    since: float,
    until: float,
) -> list[Row]:
    """GPU-hours and cost per group inside [since, until], each flavor at its current price.

    Rows are sorted by cost, then GPU-hours, largest first; a group whose flavors are priced in
    two currencies gets one row per currency (an unpriced flavor's hours join the group's row
    in its currency where there is exactly one, else a row of their own)."""
    secs: dict[tuple[str, str], float] = {}
    cost: dict[tuple[str, str], float] = {}
    for h in intervals:
        used = gpu_seconds(h, since, until)
        if used <= 0:
            continue
        price = prices.get(h.flavor)
        k = (_key(h, by), price.currency if price is not None else "")
        secs[k] = secs.get(k, 0.0) + used
        cost[k] = cost.get(k, 0.0) + cost_of(used, price)
    _fold_unpriced(secs, cost)
    rows = [Row(key, s / SECONDS_PER_HOUR, cost[(key, cur)], cur) for (key, cur), s in secs.items()]
    return sorted(rows, key=lambda r: (-r.cost, -r.gpu_hours, r.key, r.currency))


def _fold_unpriced(secs: dict[tuple[str, str], float], cost: dict[tuple[str, str], float]) -> None:
    """Unpriced hours join their group's single priced row, so a team on one currency gets one
    line whatever flavors it used."""
    currencies: dict[str, list[str]] = {}
    for key, cur in secs:
        if cur:
            currencies.setdefault(key, []).append(cur)
    for key, curs in currencies.items():
        if len(curs) == 1 and (key, "") in secs:
            secs[(key, curs[0])] += secs.pop((key, ""))
            cost.pop((key, ""))


def totals(rows: Iterable[Row]) -> list[Row]:
    """One total row per currency (unpriced hours under an empty currency)."""
    hours: dict[str, float] = {}
    money: dict[str, float] = {}
    for r in rows:
        hours[r.currency] = hours.get(r.currency, 0.0) + r.gpu_hours
        money[r.currency] = money.get(r.currency, 0.0) + r.cost
    return [Row("TOTAL", hours[c], money[c], c) for c in sorted(hours)]
