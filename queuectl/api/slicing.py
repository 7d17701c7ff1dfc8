"""The slice and balance annotations of a pod template, read and checked.

`queuectl.io/podset-slice-required-topology` and `queuectl.io/podset-slice-size` take one level
and one size, as Kueue's do, or several, outermost first, as comma-separated lists of the same
length (`topology.queuectl.io/rack,nvidia.com/gpu.clique` with `16,4`); node label keys hold no
comma. The Workload carries them as `topologyRequest.podSetSliceRequiredTopologyConstraints`.
Whether the levels are in the Topology's order is known only once a flavor (and its Topology) is
chosen: the scheduler says so then (TopologyPlacementFailed).
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import pairwise
from typing import Final

from queuectl.api import names

MAX_SLICE_LEVELS: Final = 3
_LEVELS, _SIZES = (
    names.ANNOTATION_PODSET_SLICE_REQUIRED_TOPOLOGY,
    names.ANNOTATION_PODSET_SLICE_SIZE,
)
_BALANCED = names.ANNOTATION_PODSET_BALANCED_PLACEMENT


def _split(value: str | None) -> list[str]:
    return [part.strip() for part in value.split(",")] if value else []


def slices_of(levels: str | None, sizes: str | None) -> list[tuple[str, int]]:
    """(level, size) outermost first; [] when the pair is absent or malformed (the webhook
    refuses a malformed pair, `slice_problems`)."""
    names_, numbers = _split(levels), _split(sizes)
    if not names_ or len(names_) != len(numbers) or not all(n.isdigit() for n in numbers):
        return []
    return list(zip(names_, (int(n) for n in numbers), strict=True))


def balanced_of(value: str | None) -> bool:
    return value is not None and value.strip().lower() == "true"


def slice_problems(topology: Sequence[str | None], count: int | None, where: str) -> list[str]:
    """What is wrong with a pod template's slice and balance annotations; `topology` is its
    values of `names.PODSET_TOPOLOGY_ANNOTATIONS`, `count` its pods when known."""
    values = dict(zip(names.PODSET_TOPOLOGY_ANNOTATIONS, topology, strict=False))
    problems = []
    balanced = values.get(_BALANCED)
    if balanced is not None and balanced.strip().lower() not in ("true", "false"):
        problems.append(f"{where}: annotation {_BALANCED}={balanced!r} must be 'true' or 'false'")
    levels, sizes = values.get(_LEVELS), values.get(_SIZES)
    if levels is None and sizes is None:
        return problems
    if not levels or not sizes:
        have, lack = (_LEVELS, _SIZES) if levels else (_SIZES, _LEVELS)
        return [*problems, f"{where}: annotation {have} needs {lack} beside it; set both"]
    names_, numbers = _split(levels), _split(sizes)
    if len(names_) != len(numbers):
        return [
            *problems,
            f"{where}: {_LEVELS} lists {len(names_)} levels but {_SIZES} {len(numbers)} sizes; "
            "give one size per level, outermost first (e.g. "
            f"{names.LABEL_TOPOLOGY_RACK},{names.LABEL_GPU_CLIQUE} with 16,4)",
        ]
    bad = [n for n in numbers if not n.isdigit() or int(n) < 1]
    if bad:
        return [
            *problems,
            f"{where}: {_SIZES}={sizes!r} must list whole numbers of pods of at least 1",
        ]
    slices = slices_of(levels, sizes)
    return problems + _shape_problems(slices, count, where)


def _shape_problems(slices: list[tuple[str, int]], count: int | None, where: str) -> list[str]:
    levels = [lv for lv, _ in slices]
    if len(slices) > MAX_SLICE_LEVELS:
        return [
            f"{where}: {len(slices)} slice levels, at most {MAX_SLICE_LEVELS} are supported; "
            "drop the middle ones"
        ]
    if any(not lv for lv in levels) or len(set(levels)) != len(levels):
        return [f"{where}: {_LEVELS} must list each topology level once, outermost first"]
    if names.LABEL_HOSTNAME in levels[:-1]:
        return [f"{where}: {names.LABEL_HOSTNAME} can only be the last (innermost) slice level"]
    for (a, sa), (b, sb) in pairwise(slices):
        if sa % sb:
            return [
                f"{where}: slices of {sb} per {b} do not divide the slices of {sa} per {a}; "
                "make each inner size divide the outer one, outermost first"
            ]
    if count is not None and count % slices[0][1]:
        return [
            f"{where}: {count} pods do not make whole slices of {slices[0][1]}; make the pod "
            "count a multiple of the outermost slice size"
        ]
    return []
