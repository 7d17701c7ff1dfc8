"""GPU health as a deterministic state machine: one `step` per pass, the time passed in.

A GPU turns unhealthy on the first fault it shows (critical XID, double-bit ECC, pending page
retirement or row remapping, overheating, not answering, vanished) and turns healthy again only
after `recovery_passes` consecutive clean passes AND `hold_down_s` seconds since its last fault,
so a flapping sensor or a burst of XIDs does not make the taint come and go.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime

from queuectl.agent.reader import EventKind, GpuEvent, GpuSample
from queuectl.api import names

# XIDs caused by applications, not hardware (what the NVIDIA device plugin skips as well).
APPLICATION_XIDS = frozenset({13, 31, 43, 45, 68, 109})

XID_MEANING = {
    48: "double-bit ECC error",
    63: "row remapping event",
    64: "row remapping failure",
    74: "NVLink error",
    79: "GPU has fallen off the bus",
    92: "high single-bit ECC error rate",
    94: "contained ECC error",
    95: "uncontained ECC error",
    119: "GSP RPC timeout",
    120: "GSP error",
}

# Most severe first: the node reports the worst reason it has.
SEVERITY = (
    names.REASON_GPU_NOT_ANSWERING,
    names.REASON_GPU_MISSING,
    names.REASON_GPU_XID,
    names.REASON_GPU_DOUBLE_BIT_ECC,
    names.REASON_GPU_ROW_REMAP_FAILURE,
    names.REASON_GPU_RETIRED_PAGES_PENDING,
    names.REASON_GPU_ROW_REMAP_PENDING,
    names.REASON_GPU_OVERHEATED,
)


@dataclass(frozen=True)
class HealthPolicy:
    ignored_xids: frozenset[int] = APPLICATION_XIDS
    max_temperature_c: float = 90.0
    recovery_passes: int = 3
    hold_down_s: float = 300.0


@dataclass(frozen=True)
class Fault:
    reason: str
    message: str


@dataclass(frozen=True)
class GpuState:
    """Health of one GPU between passes. `last_dbe` is the baseline for 'the DBE count went up'."""

    index: int
    uuid: str
    healthy: bool = True
    reason: str | None = None
    message: str = ""
    since: float | None = None
    last_fault_at: float | None = None
    clean_passes: int = 0
    last_dbe: int | None = None
    last_xid: int = 0


@dataclass(frozen=True)
class Observation:
    """What one pass saw: the GPUs expected (index, uuid), samples, GPUs not answering, events."""

    now: float
    expected: Sequence[tuple[int, str]]
    samples: Mapping[str, GpuSample] = field(default_factory=dict)
    not_answering: Mapping[str, str] = field(default_factory=dict)
    events: Sequence[GpuEvent] = ()


HealthState = Mapping[str, GpuState]


def _stamp(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def xid_fault(xid: int) -> Fault:
    meaning = XID_MEANING.get(xid)
    return Fault(names.REASON_GPU_XID, f"XID {xid}" + (f" ({meaning})" if meaning else ""))


def faults_of(
    policy: HealthPolicy,
    before: GpuState,
    sample: GpuSample | None,
    not_answering: str | None,
    events: Iterable[GpuEvent],
) -> list[Fault]:
    """Every fault one GPU shows in this pass, most severe first."""
    found: list[Fault] = []
    if not_answering is not None:
        found.append(Fault(names.REASON_GPU_NOT_ANSWERING, f"not answering: {not_answering}"))
    elif sample is None:
        found.append(Fault(names.REASON_GPU_MISSING, "no longer listed by NVML"))
    for event in events:
        if event.kind is EventKind.XID and event.xid is not None:
            if event.xid not in policy.ignored_xids:
                found.append(xid_fault(event.xid))
        elif event.kind is EventKind.DOUBLE_BIT_ECC:
            found.append(Fault(names.REASON_GPU_DOUBLE_BIT_ECC, "double-bit ECC error event"))
    if sample is not None:
        dbe = sample.ecc_dbe_volatile
        if dbe is not None and before.last_dbe is not None and dbe > before.last_dbe:
            found.append(
                Fault(
                    names.REASON_GPU_DOUBLE_BIT_ECC,
                    f"double-bit ECC errors rose from {before.last_dbe} to {dbe}",
                )
            )
        if sample.row_remap_failure:
            found.append(Fault(names.REASON_GPU_ROW_REMAP_FAILURE, "row remapping failed"))
        if sample.retired_pages_pending:
            found.append(
                Fault(
                    names.REASON_GPU_RETIRED_PAGES_PENDING, "retired pages pending (reset the GPU)"
                )
            )
        if sample.row_remap_pending:
            found.append(
                Fault(names.REASON_GPU_ROW_REMAP_PENDING, "row remapping pending (reset the GPU)")
            )
        temp = sample.temperature_c
        if temp is not None and temp >= policy.max_temperature_c:
            found.append(
                Fault(
                    names.REASON_GPU_OVERHEATED,
                    f"temperature {temp:g} C >= {policy.max_temperature_c:g} C",
                )
            )
    return sorted(found, key=lambda f: SEVERITY.index(f.reason))


def step_gpu(
    policy: HealthPolicy,
    before: GpuState,
    now: float,
    sample: GpuSample | None,
    not_answering: str | None,
    events: Sequence[GpuEvent],
) -> GpuState:
    """One GPU's next state."""
    faults = faults_of(policy, before, sample, not_answering, events)
    last_dbe = before.last_dbe
    if sample is not None and sample.ecc_dbe_volatile is not None:
        last_dbe = sample.ecc_dbe_volatile
    xids = [e.xid for e in events if e.kind is EventKind.XID and e.xid is not None]
    state = replace(before, last_dbe=last_dbe, last_xid=xids[-1] if xids else before.last_xid)
    if faults:
        worst = faults[0]
        since = before.since if not before.healthy and before.since is not None else now
        return replace(
            state,
            healthy=False,
            reason=worst.reason,
            message=f"{worst.message}, unhealthy since {_stamp(since)}",
            since=since,
            last_fault_at=now,
            clean_passes=0,
        )
    if state.healthy:
        return state
    clean = state.clean_passes + 1
    quiet_for = now - (state.last_fault_at if state.last_fault_at is not None else now)
    if clean >= policy.recovery_passes and quiet_for >= policy.hold_down_s:
        return replace(
            state,
            healthy=True,
            reason=None,
            message="",
            since=None,
            last_fault_at=None,
            clean_passes=0,
        )
    return replace(state, clean_passes=clean)


def step(policy: HealthPolicy, previous: HealthState, obs: Observation) -> dict[str, GpuState]:
    """The next state of every expected GPU, plus any GPU known before that is no longer listed."""
    events_by_uuid: dict[str, list[GpuEvent]] = {}
    for event in obs.events:
        events_by_uuid.setdefault(event.uuid, []).append(event)
    nxt: dict[str, GpuState] = {}
    expected = dict((uuid, index) for index, uuid in obs.expected)
    for uuid, before in previous.items():
        expected.setdefault(uuid, before.index)
    for uuid, index in sorted(expected.items(), key=lambda kv: kv[1]):
        before = previous.get(uuid, GpuState(index=index, uuid=uuid))
        nxt[uuid] = step_gpu(
            policy,
            replace(before, index=index),
            obs.now,
            obs.samples.get(uuid),
            obs.not_answering.get(uuid),
            events_by_uuid.get(uuid, []),
        )
    return nxt


@dataclass(frozen=True)
class NodeHealth:
    """The node-level view the Node carries: condition, taint and healthy count."""

    total: int
    healthy_count: int
    unhealthy: tuple[GpuState, ...]

    @property
    def healthy(self) -> bool:
        return not self.unhealthy

    @property
    def reason(self) -> str:
        reasons = {g.reason for g in self.unhealthy if g.reason}
        if not reasons:
            return names.REASON_GPU_ALL_HEALTHY
        return reasons.pop() if len(reasons) == 1 else names.REASON_GPU_MULTIPLE

    @property
    def message(self) -> str:
        if self.healthy:
            return f"{self.healthy_count}/{self.total} GPUs healthy"
        parts = [f"GPU {g.index} ({g.uuid}): {g.message}" for g in self.unhealthy]
        return f"{len(self.unhealthy)}/{self.total} GPUs unhealthy: " + "; ".join(parts)


def summarize(state: HealthState) -> NodeHealth:
    gpus = sorted(state.values(), key=lambda g: g.index)
    unhealthy = tuple(g for g in gpus if not g.healthy)
    return NodeHealth(
        total=len(gpus), healthy_count=len(gpus) - len(unhealthy), unhealthy=unhealthy
    )


def encode(state: HealthState) -> str | None:
    """The health annotation: unhealthy GPUs only (None when all are healthy), compact JSON.
    It holds nothing that changes from pass to pass, so a steady fault causes no writes."""
    bad = {
        g.uuid: {"i": g.index, "r": g.reason, "m": g.message, "since": g.since}
        for g in sorted(state.values(), key=lambda g: g.index)
        if not g.healthy
    }
    return json.dumps(bad, separators=(",", ":"), sort_keys=True) if bad else None


def decode(annotation: str | None, now: float) -> dict[str, GpuState]:
    """Unhealthy GPUs a previous agent recorded: a restart counts as a fresh fault at `now`, so the
    full hold-down applies again. Lenient: a damaged annotation restores nothing."""
    if not annotation:
        return {}
    try:
        raw = json.loads(annotation)
    except ValueError:
        return {}
    restored: dict[str, GpuState] = {}
    if not isinstance(raw, dict):
        return {}
    for uuid, rec in raw.items():
        try:
            restored[uuid] = GpuState(
                index=int(rec["i"]),
                uuid=uuid,
                healthy=False,
                reason=str(rec["r"]),
                message=str(rec.get("m", "")),
                since=float(rec["since"]),
                last_fault_at=now,
            )
        except (KeyError, TypeError, ValueError):
            continue
    return restored
