"""Scenario files: cohorts x ClusterQueues x streams, as issue 6 states them.

A scenario is data (bench/scenarios/<name>.yaml, or any YAML/JSON path) so the figures can be
reproduced and compared; this module only parses and checks it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

SCENARIO_DIR = Path(__file__).resolve().parent.parent / "scenarios"


@dataclass(frozen=True)
class Stream:
    """One class of workloads per ClusterQueue: `count` of them, one every `interval_s`."""

    cls: str
    count: int
    units: int
    runtime_s: float
    priority: int
    interval_s: float


@dataclass(frozen=True)
class QueueSpec:
    nominal: int
    borrowing_limit: int | None
    reclaim_within_cohort: str
    within_cluster_queue: str


@dataclass(frozen=True)
class Scenario:
    name: str
    cohorts: int
    queues_per_cohort: int
    resource: str
    flavor: str
    queue: QueueSpec
    streams: tuple[Stream, ...]
    targets: dict[str, float] = field(default_factory=dict)
    peer: dict[str, Any] = field(default_factory=dict)

    @property
    def cluster_queues(self) -> int:
        return self.cohorts * self.queues_per_cohort

    @property
    def workloads(self) -> int:
        return self.cluster_queues * sum(s.count for s in self.streams)

    @property
    def nominal_total(self) -> int:
        return self.cluster_queues * self.queue.nominal

    @property
    def work_unit_seconds(self) -> float:
        """The unit-seconds of work in the whole scenario (the lower bound on wall x capacity)."""
        per_queue = sum(s.count * s.units * s.runtime_s for s in self.streams)
        return per_queue * self.cluster_queues

    @property
    def min_wall_s(self) -> float:
        """Work over capacity: each cohort's work on its pooled nominal quota."""
        return self.work_unit_seconds / self.nominal_total

    def stream(self, cls: str) -> Stream:
        return next(s for s in self.streams if s.cls == cls)


def _positive(raw: dict[str, Any], key: str) -> int:
    value = int(raw[key])
    if value <= 0:
        raise ValueError(f"{key} must be positive, got {value}")
    return value


def parse(raw: dict[str, Any]) -> Scenario:
    """A Scenario from the file's mapping; raises ValueError naming what is wrong."""
    try:
        q = raw["queue"]
        streams = tuple(
            Stream(
                cls=str(s["class"]),
                count=_positive(s, "count"),
                units=_positive(s, "units"),
                runtime_s=float(s["runtimeMs"]) / 1000.0,
                priority=int(s["priority"]),
                interval_s=float(s["intervalMs"]) / 1000.0,
            )
            for s in raw["streams"]
        )
        limit = q.get("borrowingLimit")
        scenario = Scenario(
            name=str(raw["name"]),
            cohorts=_positive(raw, "cohorts"),
            queues_per_cohort=_positive(raw, "queuesPerCohort"),
            resource=str(raw.get("resource", "cpu")),
            flavor=str(raw.get("flavor", "default")),
            queue=QueueSpec(
                nominal=_positive(q, "nominalQuota"),
                borrowing_limit=None if limit is None else int(limit),
                reclaim_within_cohort=str(q.get("reclaimWithinCohort", "Any")),
                within_cluster_queue=str(q.get("withinClusterQueue", "LowerPriority")),
            ),
            streams=streams,
            targets={str(k): float(v) for k, v in (raw.get("targets") or {}).items()},
            peer=dict(raw.get("peer") or {}),
        )
    except KeyError as err:
        raise ValueError(f"scenario is missing {err}") from err
    if not streams:
        raise ValueError("scenario has no streams")
    if len({s.cls for s in streams}) != len(streams):
        raise ValueError("stream classes must be unique")
    return scenario


def load(name_or_path: str) -> Scenario:
    """`baseline` means bench/scenarios/baseline.yaml; anything with a suffix is a path."""
    path = Path(name_or_path)
    if not path.suffix:
        path = SCENARIO_DIR / f"{name_or_path}.yaml"
    if not path.exists():
        known = sorted(p.stem for p in SCENARIO_DIR.glob("*.yaml"))
        raise ValueError(f"no scenario {name_or_path!r} (known: {', '.join(known)})")
    raw = yaml.safe_load(path.read_text())  # JSON is YAML too
    if not isinstance(raw, dict):
        raise ValueError(f"{path} does not hold a mapping")
    return parse(raw)
