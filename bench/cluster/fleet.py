"""A topology scenario's fleet and placements: Node objects in a tree of levels (block > rack >
node, or block > rack > NVLink domain > node), and how a stream's pod set asks to be placed on
them (required, preferred, slices, balance), by level name.

Pure: parsing, checks and the API objects as dicts. The checks mirror what the API and the
scheduler would refuse, so a mistaken scenario fails before a run, with the reason.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from itertools import pairwise
from typing import Any

from queuectl.api import names

MAX_LEVELS = 8
MAX_SLICE_LEVELS = 3


@dataclass(frozen=True)
class Level:
    """`count` domains of this level inside each domain of the level above (the last: nodes)."""

    name: str
    label: str
    count: int


@dataclass(frozen=True)
class Fleet:
    levels: tuple[Level, ...]
    """Coarse to fine; the last level is the nodes themselves (kubernetes.io/hostname)."""
    capacity: dict[str, str]
    """Each node's capacity = allocatable (cpu, memory, pods, nvidia.com/gpu ...)."""

    @property
    def nodes(self) -> int:
        return math.prod(level.count for level in self.levels)

    def index(self, level: str) -> int:
        return next(i for i, lv in enumerate(self.levels) if lv.name == level)

    def label(self, level: str) -> str:
        return self.levels[self.index(level)].label

    def paths(self) -> list[tuple[int, ...]]:
        """Every node as its index at each level, in creation order (rack after rack)."""
        out: list[tuple[int, ...]] = [()]
        for level in self.levels:
            out = [(*p, i) for p in out for i in range(level.count)]
        return out


@dataclass(frozen=True)
class Placement:
    """A pod set's topologyRequest, by level name."""

    required: str | None = None
    preferred: str | None = None
    slices: tuple[tuple[str, int], ...] = ()
    """(level, pods per slice), outermost first."""
    balanced: bool = False

    @property
    def mode(self) -> str:
        """required | preferred | sliced | balanced: how the report names it."""
        if self.balanced:
            return "balanced"
        if self.slices:
            return "sliced"
        return "required" if self.required else "preferred"


def parse_fleet(raw: dict[str, Any], resource: str) -> Fleet:
    try:
        levels = tuple(
            Level(name=str(lv["name"]), label=str(lv["label"]), count=int(lv["count"]))
            for lv in raw["levels"]
        )
        capacity = {str(k): str(v) for k, v in (raw.get("capacity") or {}).items()}
    except KeyError as err:
        raise ValueError(
            f"nodes: a level is missing {err} (each needs name, label, count)"
        ) from err
    if not levels or len(levels) > MAX_LEVELS:
        raise ValueError(f"nodes: give 1 to {MAX_LEVELS} levels, coarse to fine")
    if levels[-1].label != names.LABEL_HOSTNAME:
        raise ValueError(
            f"nodes: the last level must be the nodes themselves ({names.LABEL_HOSTNAME}), "
            f"not {levels[-1].label}"
        )
    for attr in ("name", "label"):
        values = [getattr(lv, attr) for lv in levels]
        if len(set(values)) != len(values):
            raise ValueError(f"nodes: level {attr}s must be unique, got {values}")
    if any(lv.count <= 0 for lv in levels):
        raise ValueError("nodes: every level count must be positive")
    if resource not in capacity:
        raise ValueError(f"nodes: capacity must offer the scenario's resource {resource!r}")
    return Fleet(levels, capacity)


def parse_placement(stream: dict[str, Any], fleet: Fleet | None) -> Placement:
    """A stream's `topology` mapping, checked against the fleet's levels."""
    cls = stream.get("class")
    raw = stream["topology"]
    if fleet is None:
        raise ValueError(f"stream {cls}: a topology request needs a `nodes` fleet")
    known = [lv.name for lv in fleet.levels]

    def level(name: Any) -> str:
        if name not in known:
            raise ValueError(f"stream {cls}: no level {name!r} (levels: {', '.join(known)})")
        return str(name)

    try:
        slices = tuple((level(s["level"]), int(s["size"])) for s in raw.get("slices") or ())
    except KeyError as err:
        raise ValueError(f"stream {cls}: a slice is missing {err} (level, size)") from err
    placement = Placement(
        required=None if raw.get("required") is None else level(raw["required"]),
        preferred=None if raw.get("preferred") is None else level(raw["preferred"]),
        slices=slices,
        balanced=bool(raw.get("balanced", False)),
    )
    problem = _problem(placement, fleet, int(stream.get("pods", 1)))
    if problem:
        raise ValueError(f"stream {cls}: {problem}")
    return placement


def _problem(p: Placement, fleet: Fleet, pods: int) -> str | None:
    if p.required and p.preferred:
        return "set either required or preferred, not both"
    if not (p.required or p.preferred or p.slices or p.balanced):
        return "the topology request asks for nothing (required, preferred, slices, balanced)"
    if len(p.slices) > MAX_SLICE_LEVELS:
        return f"at most {MAX_SLICE_LEVELS} slice levels"
    order = [fleet.index(name) for name, _ in p.slices]
    if order != sorted(set(order)):
        return "slice levels must be distinct and outermost first"
    sizes = [size for _, size in p.slices]
    if any(size <= 0 for size in sizes) or any(a % b for a, b in pairwise(sizes)):
        return f"slice sizes {sizes} must be positive, each dividing the one before it"
    if sizes and pods % sizes[0]:
        return f"{pods} pods are not a whole number of slices of {sizes[0]}"
    outer = p.required or p.preferred
    if outer and order and fleet.index(outer) > order[0]:
        return f"the {outer} level is finer than the slices' {p.slices[0][0]} level"
    return None


def topology_request(p: Placement, fleet: Fleet) -> dict[str, Any]:
    """The Workload pod set's topologyRequest."""
    out: dict[str, Any] = {}
    if p.required:
        out["required"] = fleet.label(p.required)
    if p.preferred:
        out["preferred"] = fleet.label(p.preferred)
    if p.slices:
        out["podSetSliceRequiredTopologyConstraints"] = [
            {"topology": fleet.label(name), "size": size} for name, size in p.slices
        ]
    if p.balanced:
        out["balancedPlacement"] = True
    return out


def domain_value(run_id: str, fleet: Fleet, path: tuple[int, ...]) -> str:
    """The label value of the domain at `path` (indices from the top): unique in the run, so two
    racks of different blocks never share a value, and no run shares one with another."""
    parts = [f"{lv.name[0]}{i}" for lv, i in zip(fleet.levels, path, strict=False)]
    return "-".join([run_id, *parts])


def node(run_id: str, fleet: Fleet, path: tuple[int, ...], run_label: str) -> dict[str, Any]:
    """One Node object, Ready once the control plane's kwok takes it (it keeps the capacity)."""
    name = domain_value(run_id, fleet, path)
    labels = {run_label: run_id, "type": "kwok"}
    for depth, level in enumerate(fleet.levels):
        labels[level.label] = domain_value(run_id, fleet, path[: depth + 1])
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": labels,
            "annotations": {names.ANNOTATION_KWOK_NODE: names.KWOK_NODE_FAKE},
        },
        "spec": {},
        "status": {"capacity": dict(fleet.capacity), "allocatable": dict(fleet.capacity)},
    }
