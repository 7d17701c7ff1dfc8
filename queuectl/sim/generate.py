"""A synthetic trace with the shapes published for real GPU clusters, reproducible from a seed.

Shapes (docs/design/simulate.md cites the sources): arrivals follow a diurnal cycle (busier in
working hours, quieter at night and at weekends); most jobs take 1-8 GPUs in powers of two and a
tail are multi-node gangs of 8-GPU pods; run times are heavy-tailed (log-normal: most jobs run
minutes, a few run days, and those few hold most GPU-hours). Teams (the LocalQueues of the
manifests) get different habits, round-robin in name order: many small short jobs, big long
gangs, or bursts of work with quiet spells in between. The parameters are ours, chosen to match
those shapes, not fitted figures; `load` scales run times so the offered GPU-hours are that
fraction of the fleet's capacity over the trace.
"""

from __future__ import annotations

import math
import random
from collections.abc import Mapping
from dataclasses import dataclass, field

from queuectl.core import GPU, Node
from queuectl.sim.config import SimConfig, SimInputError
from queuectl.sim.trace import Job

DAY = 86400.0
MAX_RUNTIME = 7 * DAY


@dataclass(frozen=True, slots=True)
class GenerateOptions:
    jobs: int = 1000
    days: float = 1.0
    seed: int = 1
    load: float = 0.8
    """Offered GPU-hours / fleet GPU-hours over the trace's span."""
    habits: Mapping[str, str] = field(default_factory=dict)
    """LocalQueue name -> habit name (`HABITS`); the others round-robin as before."""


@dataclass(frozen=True, slots=True)
class Habit:
    name: str
    weight: float
    """Share of the arrivals."""
    sizes: tuple[tuple[int, float], ...]
    """(total GPUs, weight): powers of two."""
    median_runtime: float
    sigma: float
    burst: bool = False


HABITS = (
    Habit("small-and-many", 3.0, ((1, 55), (2, 20), (4, 15), (8, 10)), 600.0, 1.6),
    Habit(
        "big-gangs",
        1.0,
        ((1, 20), (2, 10), (4, 15), (8, 30), (16, 15), (32, 7), (64, 3)),
        3600.0,
        1.5,
    ),
    Habit("bursty", 1.5, ((1, 35), (2, 20), (4, 20), (8, 20), (16, 5)), 1200.0, 1.8, True),
    # named only by --habits: a team that submits far beyond its quota all the time, and one
    # that barely uses its own (its idle quota is what the others borrow)
    Habit("always-borrows", 6.0, ((1, 30), (2, 20), (4, 25), (8, 25)), 1800.0, 1.2),
    Habit("light", 0.5, ((1, 60), (2, 25), (4, 15)), 900.0, 1.2),
)
BY_NAME = {h.name: h for h in HABITS}
ROUND_ROBIN = HABITS[:3]
"""The habits teams get unless `GenerateOptions.habits` names one."""


def diurnal(t: float) -> float:
    """Relative arrival rate at `t` seconds from a Monday midnight: peak mid-afternoon, trough
    before dawn, weekends at 40 %; its maximum is 1 (for thinning)."""
    day = t / DAY
    hour = (day % 1.0) * 24
    rate = 0.55 + 0.45 * math.cos(2 * math.pi * (hour - 14) / 24)
    if int(day) % 7 >= 5:
        rate *= 0.4
    return rate


def _pick(rng: random.Random, table: tuple[tuple[int, float], ...]) -> int:
    sizes, weights = zip(*table, strict=True)
    size: int = rng.choices(sizes, weights=weights)[0]
    return size


def _cap(config: SimConfig, cq_name: str, nodes: tuple[Node, ...]) -> int:
    """The most GPUs one of the queue's jobs could ever hold: its first GPU flavor's nominal
    plus borrowing limit (unlimited: the flavor's GPUs), at most what that flavor's nodes have."""
    cq = config.cluster_queue(cq_name)
    if cq is None:
        return 0
    for group in cq.resource_groups:
        for fq in group.flavors:
            for r in fq.resources:
                if r.name != GPU:
                    continue
                flavor = config.flavor(fq.name)
                labels = flavor.node_labels if flavor is not None else {}
                have = sum(
                    n.allocatable.get(GPU, 0)
                    for n in nodes
                    if all(n.labels.get(k) == v for k, v in labels.items())
                )
                limit = have if r.borrowing_limit is None else r.nominal + r.borrowing_limit
                return min(have, limit)
    return 0


def generate_trace(
    config: SimConfig, nodes: tuple[Node, ...], options: GenerateOptions
) -> tuple[Job, ...]:
    if options.jobs <= 0 or options.days <= 0 or options.load <= 0:
        raise SimInputError("--generate: jobs, days and load must be more than 0")
    rng = random.Random(options.seed)
    teams = sorted(config.local_queues.items())
    caps = {lq: _cap(config, cq, nodes) for lq, cq in teams}
    teams = [(lq, cq) for lq, cq in teams if caps[lq] > 0]
    if not teams:
        raise SimInputError("--generate: no LocalQueue leads to GPU quota on these nodes")
    unknown = sorted(set(options.habits) - {lq[1] for lq, _ in teams})
    if unknown:
        raise SimInputError(f"--habits: no LocalQueue with GPU quota is named {unknown[0]}")
    bad = sorted(h for h in options.habits.values() if h not in BY_NAME)
    if bad:
        raise SimInputError(f"--habits: unknown habit {bad[0]}; pick one of {sorted(BY_NAME)}")
    habits = {
        lq: BY_NAME[options.habits[lq[1]]]
        if lq[1] in options.habits
        else ROUND_ROBIN[i % len(ROUND_ROBIN)]
        for i, (lq, _) in enumerate(teams)
    }
    weights = [habits[lq].weight for lq, _ in teams]
    classes = sorted(config.priority_classes.values(), key=lambda c: c.value)
    # lower classes are more common: 4:2:1 ... from the lowest up
    class_weights = [2.0 ** (len(classes) - i) for i in range(len(classes))]
    span = options.days * DAY
    gpus_total = sum(n.allocatable.get(GPU, 0) for n in nodes)
    # bursty teams submit only in some 2-hour windows
    windows = {
        lq: {w for w in range(int(span // 7200) + 1) if rng.random() < 0.3} for lq, _ in teams
    }

    raw: list[tuple[float, tuple[str, str], int, float, str]] = []
    while len(raw) < options.jobs:
        t = rng.random() * span
        if rng.random() > diurnal(t):
            continue
        lq = rng.choices([lq for lq, _ in teams], weights=weights)[0]
        habit = habits[lq]
        if habit.burst and int(t // 7200) not in windows[lq]:
            continue
        gpus = min(_pick(rng, habit.sizes), caps[lq])
        gpus = 1 << (gpus.bit_length() - 1)  # stay a power of two under the cap
        runtime = rng.lognormvariate(math.log(habit.median_runtime), habit.sigma)
        pc = rng.choices(classes, weights=class_weights)[0].name if classes else ""
        raw.append((t, lq, gpus, runtime, pc))
    offered = sum(g * r for _, _, g, r, _ in raw)
    scale = options.load * gpus_total * span / offered if offered > 0 else 1.0
    jobs = []
    for i, (t, (ns, queue), gpus, runtime, pc) in enumerate(sorted(raw)):
        run = min(MAX_RUNTIME, max(30.0, runtime * scale))
        pods, per_pod = (gpus // 8, 8) if gpus > 8 else (1, gpus)
        jobs.append(
            Job(
                name=f"job-{i:06d}",
                submit=round(t, 1),
                namespace=ns,
                queue=queue,
                pods=pods,
                gpus=per_pod,
                runtime=round(run, 1),
                priority_class=pc,
                topology_preferred="rack" if pods > 1 and config.topologies else "",
                checkpoint=1800.0 if run > 3600 and rng.random() < 0.7 else 0.0,
            )
        )
    return tuple(jobs)
