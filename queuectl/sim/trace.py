"""A trace: the jobs to replay, read from CSV (with a header) or JSON lines.

Fields (CSV columns or JSON keys): `submit` (seconds from the start), `namespace`, `queue` (the
LocalQueue), `priority_class` (optional), `pods`, `gpus` (per pod), `cpu` and `memory` (per pod,
Kubernetes quantities, optional), `runtime` (seconds of work), and optionally `name`,
`topology_required` / `topology_preferred` (a Topology level: its node label, or its last part
such as `rack`), `checkpoint` (seconds between checkpoints; none: a preemption loses everything)
and `max_exec` (maximumExecutionTimeSeconds).
"""

from __future__ import annotations

import csv
import io
import json
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
    checkpoint: float = 0.0
    max_exec: float | None = None

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    def to_record(self) -> dict[str, Any]:
        """Only the fields that are set: one JSON line of a trace file."""
        return {k: v for k, v in asdict(self).items() if v not in ("", None, 0.0) or k == "submit"}


def _number(row: Mapping[str, Any], key: str, where: str, *, required: bool = False) -> float:
    value = row.get(key)
    if value in (None, ""):
        if required:
            raise SimInputError(f"{where}: '{key}' is missing; every job needs one")
        return 0.0
    try:
        out = float(value)
    except (TypeError, ValueError):
        raise SimInputError(f"{where}: '{key}' is {value!r}, not a number") from None
    if out < 0 or out != out:
        raise SimInputError(f"{where}: '{key}' is {value!r}; it must be 0 or more")
    return out


def job_from_record(row: Mapping[str, Any], index: int, where: str) -> Job:
    unknown = sorted(set(row) - set(FIELDS))
    if unknown:
        raise SimInputError(
            f"{where}: unknown field(s) {', '.join(unknown)}; known: {', '.join(FIELDS)}"
        )
    for key in ("namespace", "queue"):
        if not str(row.get(key) or "").strip():
            raise SimInputError(f"{where}: '{key}' is missing; every job needs one")
    pods = int(_number(row, "pods", where) or 1)
    runtime = _number(row, "runtime", where, required=True)
    if runtime <= 0:
        raise SimInputError(f"{where}: 'runtime' must be more than 0 seconds")
    max_exec = _number(row, "max_exec", where)
    return Job(
        name=str(row.get("name") or f"job-{index:06d}"),
        submit=_number(row, "submit", where, required=True),
        namespace=str(row["namespace"]).strip(),
        queue=str(row["queue"]).strip(),
        pods=pods,
        gpus=int(_number(row, "gpus", where)),
        runtime=runtime,
        priority_class=str(row.get("priority_class") or ""),
        cpu=str(row.get("cpu") or ""),
        memory=str(row.get("memory") or ""),
        topology_required=str(row.get("topology_required") or ""),
        topology_preferred=str(row.get("topology_preferred") or ""),
        checkpoint=_number(row, "checkpoint", where),
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
