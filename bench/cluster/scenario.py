"""Scenario files: cohorts x ClusterQueues x streams, and for topology scenarios a fleet of
Node objects and how each stream's pod set asks to be placed on it.

A scenario is data (bench/scenarios/<name>.yaml, or any YAML/JSON path) so the figures can be
reproduced and compared; this module only parses and checks it (bench/cluster/fleet.py checks
the fleet and the placements).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from bench.cluster.fleet import Fleet, Placement, parse_fleet, parse_placement

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
    pods: int = 1
    """The pod set's count; each pod asks for units / pods of the resource."""
    size: str = ""
    """The size class it is compared by (small, medium, large); its class when not given."""
    placement: Placement | None = None
    """Its topologyRequest (topology scenarios only)."""

    @property
    def size_class(self) -> str:
        return self.size or self.cls

    def pod_request(self) -> str:
        """One pod's request as a quantity: whole units, else millis (cpu only)."""
        if self.units % self.pods == 0:
            return str(self.units // self.pods)
        return f"{self.units * 1000 // self.pods}m"


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
    fleet: Fleet | None = None
    """Node objects to create (topology scenarios); None: no nodes, the flavor has no topology."""
    ratio_targets: dict[str, Any] = field(default_factory=dict)
    """Targets as ratios to another scenario run beside it: {against, wall_s, tta_s}."""
    peer_here: dict[str, Any] = field(default_factory=dict)
    """The reference measured on this machine beside its own run of `against`."""

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

    @property
    def sizes(self) -> tuple[str, ...]:
        """The size classes, in stream order."""
        return tuple(dict.fromkeys(s.size_class for s in self.streams))


def _positive(raw: dict[str, Any], key: str) -> int:
    value = int(raw[key])
    if value <= 0:
        raise ValueError(f"{key} must be positive, got {value}")
    return value


def _stream(s: dict[str, Any], fleet: Fleet | None, resource: str) -> Stream:
    stream = Stream(
        cls=str(s["class"]),
        count=_positive(s, "count"),
        units=_positive(s, "units"),
        runtime_s=float(s["runtimeMs"]) / 1000.0,
        priority=int(s["priority"]),
        interval_s=float(s["intervalMs"]) / 1000.0,
        pods=_positive(s, "pods") if "pods" in s else 1,
        size=str(s.get("size") or ""),
        placement=None if s.get("topology") is None else parse_placement(s, fleet),
    )
    whole = stream.units % stream.pods == 0
    if not whole and (resource != "cpu" or stream.units * 1000 % stream.pods):
        raise ValueError(
            f"stream {stream.cls}: {stream.units} {resource} do not split evenly over "
            f"{stream.pods} pods; make units a multiple of pods"
            + (" (or of pods / 1000 in millicores)" if resource == "cpu" else "")
        )
    return stream


def parse(raw: dict[str, Any]) -> Scenario:
    """A Scenario from the file's mapping; raises ValueError naming what is wrong."""
    try:
        q = raw["queue"]
        resource = str(raw.get("resource", "cpu"))
        fleet = None if raw.get("nodes") is None else parse_fleet(raw["nodes"], resource)
        streams = tuple(_stream(s, fleet, resource) for s in raw["streams"])
        limit = q.get("borrowingLimit")
        scenario = Scenario(
            name=str(raw["name"]),
            cohorts=_positive(raw, "cohorts"),
            queues_per_cohort=_positive(raw, "queuesPerCohort"),
            resource=resource,
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
            fleet=fleet,
            ratio_targets=dict(raw.get("ratioTargets") or {}),
            peer_here=dict(raw.get("peerHere") or {}),
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
