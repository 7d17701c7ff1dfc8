"""What the arrivals alone make work wait: a scenario replayed on an ideal pooled scheduler.

A topology scenario is judged by its time to admission over the baseline's, size class by size
class. Part of any gap is not placement at all: the `tas` scenario splits each class into three
streams at the baseline's interval, so its large Workloads arrive three times as fast, and a
cohort holds only six of them at once. This model separates that part from what placement
costs. It replays one cohort's arrivals, exactly as the scenario schedules them, on a scheduler
that is ideal except for one figure: the cohort's quota is one pool (each ClusterQueue up to its
nominal quota plus borrowing limit), work is admitted the moment it fits, highest priority
first and then oldest (a later, smaller Workload may start while a bigger one waits), and each
admission holds its quota for its runtime plus `hold_extra_s`. With `hold_extra_s` 0 it is the
floor no scheduler can beat; fitted to a measured run (the seconds of finish, watch and
admission latency around each runtime), it predicts another scenario's waits on the same
machine. Pure: no cluster, no clock.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass

from bench.cluster.scenario import Scenario, Stream

COARSE_STEP_S = 0.1
FINE_STEP_S = 0.01
FIT_MAX_S = 5.0


@dataclass(frozen=True, order=True)
class _Arrival:
    at: float
    order: int
    queue: int
    stream: Stream


def _arrivals(scenario: Scenario) -> list[_Arrival]:
    """One cohort's Workloads, when each stream of each ClusterQueue creates them."""
    out: list[tuple[float, int, Stream]] = [
        (k * s.interval_s, q, s)
        for q in range(scenario.queues_per_cohort)
        for s in scenario.streams
        for k in range(s.count)
    ]
    out.sort(key=lambda a: (a[0], -a[2].priority))
    return [_Arrival(at, i, q, s) for i, (at, q, s) in enumerate(out)]


def times_to_admission(scenario: Scenario, hold_extra_s: float = 0.0) -> dict[str, float]:
    """Average seconds from creation to admission per size class on the ideal scheduler."""
    if hold_extra_s < 0:
        raise ValueError(f"hold_extra_s must be >= 0, got {hold_extra_s}")
    arrivals = _arrivals(scenario)
    pool = scenario.queues_per_cohort * scenario.queue.nominal
    limit = scenario.queue.borrowing_limit
    cap = scenario.queue.nominal + (pool if limit is None else limit)
    free = pool
    used = [0] * scenario.queues_per_cohort
    running: list[tuple[float, int, int]] = []  # (ends, units, queue)
    waiting: list[tuple[int, float, int, _Arrival]] = []  # (-priority, at, order, arrival)
    waits: dict[str, list[float]] = {}
    smallest = min(s.units for s in scenario.streams)
    i = 0
    while i < len(arrivals) or waiting:
        if not running and i == len(arrivals):
            big = min(waiting)[3].stream
            raise ValueError(
                f"stream {big.cls} asks for {big.units} units, more than one ClusterQueue of "
                f"this scenario can ever hold ({min(pool, cap)}): raise its quota"
            )
        now = min(
            ([arrivals[i].at] if i < len(arrivals) else []) + ([running[0][0]] if running else [])
        )
        while running and running[0][0] <= now:
            _, units, queue = heapq.heappop(running)
            free += units
            used[queue] -= units
        while i < len(arrivals) and arrivals[i].at <= now:
            a = arrivals[i]
            heapq.heappush(waiting, (-a.stream.priority, a.at, a.order, a))
            i += 1
        still: list[tuple[int, float, int, _Arrival]] = []
        while waiting and free >= smallest:
            entry = heapq.heappop(waiting)
            a = entry[3]
            units = a.stream.units
            if units <= free and used[a.queue] + units <= cap:
                free -= units
                used[a.queue] += units
                ends = now + a.stream.runtime_s + hold_extra_s
                heapq.heappush(running, (ends, units, a.queue))
                waits.setdefault(a.stream.size_class, []).append(now - a.at)
            else:
                still.append(entry)
        for entry in still:
            heapq.heappush(waiting, entry)
    return {size: round(sum(w) / len(w), 3) for size, w in waits.items()}


def fit_hold(scenario: Scenario, measured: dict[str, float]) -> dict[str, float]:
    """Per size class, the `hold_extra_s` whose model wait is nearest the measured average.

    The model's wait is not strictly monotone in the hold at small values (a longer hold can
    line arrivals up better), so this scans a coarse grid, then a fine one around the best.
    """

    def nearest(modelled: list[tuple[float, dict[str, float]]], size: str, avg: float) -> float:
        return min(modelled, key=lambda hm: abs(hm[1].get(size, 0.0) - avg))[0]

    def model(holds: list[float]) -> list[tuple[float, dict[str, float]]]:
        return [(h, times_to_admission(scenario, h)) for h in holds]

    steps = int(COARSE_STEP_S / FINE_STEP_S)
    coarse = model([round(k * COARSE_STEP_S, 3) for k in range(int(FIT_MAX_S / COARSE_STEP_S) + 1)])
    out: dict[str, float] = {}
    for size, avg in measured.items():
        if size not in coarse[0][1]:
            continue
        best = nearest(coarse, size, avg)
        fine = [round(best + k * FINE_STEP_S, 3) for k in range(-steps, steps + 1)]
        out[size] = nearest(model([h for h in fine if h >= 0]), size, avg)
    return out


def expected_ratios(
    scenario: Scenario, against: Scenario, against_measured: dict[str, float]
) -> dict[str, dict[str, float]]:
    """What the arrivals alone predict for `scenario` over `against`, per size class.

    Each size's hold is fitted to the `against` run as measured; the same hold then gives the
    model's wait in `scenario`. `floor_s` is `scenario`'s wait with no hold at all.
    """
    holds = fit_hold(against, against_measured)
    floor = times_to_admission(scenario)
    out: dict[str, dict[str, float]] = {}
    for size, hold in holds.items():
        base = times_to_admission(against, hold)[size]
        ours = times_to_admission(scenario, hold).get(size)
        if ours is None or base <= 0:
            continue
        out[size] = {
            "hold_extra_s": hold,
            "floor_s": floor[size],
            "against_model_s": base,
            "model_s": ours,
            "ratio": round(ours / base, 3),
        }
    return out
