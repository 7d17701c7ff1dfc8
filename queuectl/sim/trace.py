"""A trace: the jobs to replay, read from CSV (with a header) or JSON lines.

Fields (CSV columns or JSON keys): `submit` (seconds from the start), `namespace`, `queue` (the
LocalQueue), `priority_class` (optional), `pods`, `gpus` (per pod), `cpu` and `memory` (per pod,
Kubernetes quantities, optional), `runtime` (seconds of work), and optionally `name`,
`topology_required` / `topology_preferred` (a Topology level: its node label, or its last part
such as `rack`), `topology_slices` (slices of the job's pods, each in one domain of a level,
outermost first: `rack:16,clique:4`), `topology_balanced` (`true`: spread the pods or slices
evenly over the domains chosen), `checkpoint` (seconds between checkpoints; none: a preemption
loses everything) and `max_exec` (maximumExecutionTimeSeconds).

Every number is checked against `BOUNDS` before the job exists: finite, in range, and whole
where it counts things (pods, GPUs; `2.0` reads as 2, `0.5` is refused). A value the engine
cannot replay (`inf` would never finish, `1e400` pods cannot be built) is the trace's error,
named by file, line and field, never a traceback or a summary with NaN in it.
"""

from __future__ import annotations

import csv
import io
import json
import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from queuectl.sim.config import SimInputError

FIELDS = (
    "submit",
    "namespace",
    "queue",
    "priority_class",
    "pods",
    "gpus",
    "cpu",
    "memory",
    "runtime",
    "name",
    "topology_required",
    "topology_preferred",
    "topology_slices",
    "topology_balanced",
    "checkpoint",
    "max_exec",
)


@dataclass(frozen=True, slots=True)
class Job:
    name: str
    submit: float
    namespace: str
    queue: str
    pods: int
    gpus: int
    runtime: float
    priority_class: str = ""
    cpu: str = ""
    memory: str = ""
    topology_required: str = ""
    topology_preferred: str = ""
    topology_slices: tuple[tuple[str, int], ...] = ()
    """(level as written, pods per slice), outermost first."""
    topology_balanced: bool = False
    checkpoint: float = 0.0
    max_exec: float | None = None

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    def to_record(self) -> dict[str, Any]:
        """Only the fields that are set: one JSON line of a trace file."""
        out = asdict(self)
        out["topology_slices"] = ",".join(f"{lv}:{n}" for lv, n in self.topology_slices)
        return {k: v for k, v in out.items() if v not in ("", None, 0.0) or k == "submit"}


MAX_SECONDS = 10 * 365 * 86_400.0
"""The longest span a trace time may give (ten years): beyond it a float clock loses the
seconds a job runs, and no real trace comes close."""
MAX_PODS = 100_000
"""Pods of one job: more than any GPU cluster holds."""
MAX_GPUS = 1_024
"""GPUs per pod: more than any node holds."""


@dataclass(frozen=True, slots=True)
class Bounds:
    """What a numeric field may hold, and the words that say so in an error."""

    low: float
    high: float
    integral: bool = False
    above_low: bool = False
    """The value must be more than `low`, not equal to it."""
    allowed: str = ""

    def admits(self, value: float) -> bool:
        if not math.isfinite(value) or value > self.high:
            return False
        if value < self.low or (self.above_low and value == self.low):
            return False
        return not self.integral or value == int(value)


_SECONDS_OR_NONE = f"seconds, 0 (none) to {MAX_SECONDS:,.0f}"
BOUNDS: dict[str, Bounds] = {
    "submit": Bounds(0.0, MAX_SECONDS, allowed=f"seconds from the start, 0 to {MAX_SECONDS:,.0f}"),
    "runtime": Bounds(
        0.0,
        MAX_SECONDS,
        above_low=True,
        allowed=f"seconds, more than 0, at most {MAX_SECONDS:,.0f}",
    ),
    "pods": Bounds(
        1, MAX_PODS, integral=True, allowed=f"a whole number of pods, 1 to {MAX_PODS:,}"
    ),
    "gpus": Bounds(
        0, MAX_GPUS, integral=True, allowed=f"a whole number of GPUs per pod, 0 to {MAX_GPUS:,}"
    ),
    "checkpoint": Bounds(0.0, MAX_SECONDS, allowed=_SECONDS_OR_NONE),
    "max_exec": Bounds(0.0, MAX_SECONDS, allowed=_SECONDS_OR_NONE),
}
"""Every numeric field of a trace row (cpu and memory are quantities, read by the controller's
parser when the job becomes a Workload)."""


def _number(row: Mapping[str, Any], key: str, where: str, *, default: float | None = None) -> float:
    """The field as a number within its `BOUNDS`; `default` when absent (None: required).
    JSON's NaN and Infinity, a CSV's `inf` or `1e400`, a fraction of a pod and a boolean are
    refused with the file, the line, the field and what it may be."""
    value = row.get(key)
    bounds = BOUNDS[key]
    if value in (None, ""):
        if default is None:
            raise SimInputError(
                f"{where}: '{key}' is missing; every job needs one ({bounds.allowed})"
            )
        return default
    try:
        if isinstance(value, bool):
            raise TypeError
        out = float(value)
    except (TypeError, ValueError, OverflowError):
        raise SimInputError(
            f"{where}: '{key}' is {value!r}, not a number; give {bounds.allowed}"
        ) from None
    if not bounds.admits(out):
        raise SimInputError(f"{where}: '{key}' is {value!r}; give {bounds.allowed}")
    return out


def _slices(row: Mapping[str, Any], where: str) -> tuple[tuple[str, int], ...]:
    """`level:size` pairs, outermost first, separated by commas or spaces."""
    value = row.get("topology_slices")
    if value in (None, ""):
        return ()
    out = []
    for part in str(value).replace(",", " ").split():
        level, _, size = part.rpartition(":")
        if not level or not size.isdigit() or not 0 < int(size) <= MAX_PODS:
            raise SimInputError(
                f"{where}: 'topology_slices' is {value!r}; give level:pods pairs, outermost "
                "first, e.g. rack:16,clique:4"
            )
        out.append((level, int(size)))
    return tuple(out)


def _flag(row: Mapping[str, Any], key: str, where: str) -> bool:
    value = row.get(key)
    if value in (None, "") or value is False:
        return False
    if value is True or str(value).strip().lower() in ("true", "1"):
        return True
    if str(value).strip().lower() in ("false", "0"):
        return False
    raise SimInputError(f"{where}: '{key}' is {value!r}; give true or false")


def job_from_record(row: Mapping[str, Any], index: int, where: str) -> Job:
    unknown = sorted(set(row) - set(FIELDS))
    if unknown:
        raise SimInputError(
            f"{where}: unknown field(s) {', '.join(unknown)}; known: {', '.join(FIELDS)}"
        )
    for key in ("namespace", "queue"):
        if not str(row.get(key) or "").strip():
            raise SimInputError(f"{where}: '{key}' is missing; every job needs one")
    max_exec = _number(row, "max_exec", where, default=0.0)
    return Job(
        name=str(row.get("name") or f"job-{index:06d}"),
        submit=_number(row, "submit", where),
        namespace=str(row["namespace"]).strip(),
        queue=str(row["queue"]).strip(),
        pods=int(_number(row, "pods", where, default=1)),
        gpus=int(_number(row, "gpus", where, default=0)),
        runtime=_number(row, "runtime", where),
        priority_class=str(row.get("priority_class") or ""),
        cpu=str(row.get("cpu") or ""),
        memory=str(row.get("memory") or ""),
        topology_required=str(row.get("topology_required") or ""),
        topology_preferred=str(row.get("topology_preferred") or ""),
        topology_slices=_slices(row, where),
        topology_balanced=_flag(row, "topology_balanced", where),
        checkpoint=_number(row, "checkpoint", where, default=0.0),
        max_exec=max_exec or None,
    )


def parse_trace(text: str, source: str = "trace") -> tuple[Job, ...]:
    """CSV with a header line, or JSON lines (the first non-blank character says which)."""
    stripped = text.lstrip()
    jobs: list[Job] = []
    if stripped.startswith("{"):
        for n, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as err:
                raise SimInputError(f"{source}:{n}: not JSON ({err.msg})") from None
            if not isinstance(row, dict):
                raise SimInputError(f"{source}:{n}: each line must be one JSON object")
            jobs.append(job_from_record(row, len(jobs), f"{source}:{n}"))
    else:
        reader = csv.DictReader(io.StringIO(text))
        for n, row in enumerate(reader, 2):
            clean = {k.strip(): v for k, v in row.items() if k is not None}
            jobs.append(job_from_record(clean, len(jobs), f"{source}:{n}"))
    if not jobs:
        raise SimInputError(f"{source}: no jobs in the trace")
    seen: set[str] = set()
    for job in jobs:
        if job.key in seen:
            raise SimInputError(f"{source}: job {job.key} appears twice; names must be unique")
        seen.add(job.key)
    return tuple(sorted(jobs, key=lambda j: (j.submit, j.key)))


def dump_trace(jobs: tuple[Job, ...]) -> str:
    """JSON lines, readable by `parse_trace` (for `--generate --save-trace`)."""
    return "".join(json.dumps(j.to_record(), sort_keys=True) + "\n" for j in jobs)
