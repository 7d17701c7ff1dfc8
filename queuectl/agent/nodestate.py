"""What the Node should carry, and the minimal patch that gets it there. Pure.

Two patches, because Kubernetes splits them: a JSON merge patch on the Node (labels, annotations
and `spec.taints`, the latter guarded by `resourceVersion` since a merge patch replaces the whole
list) and a strategic merge patch on `nodes/status` that touches only our condition (conditions
merge by `type`, so the kubelet's own conditions stay as they are).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from queuectl.agent import discovery, sharing
from queuectl.agent.discovery import Inventory
from queuectl.agent.health import NodeHealth
from queuectl.api import names

# Labels and annotations this agent owns: a key it owns but no longer wants is removed.
OWN_LABELS = discovery.GFD_LABEL_KEYS | {names.LABEL_GPU_NVLINK, names.LABEL_GPU_HEALTHY_COUNT}
OWN_ANNOTATIONS = frozenset(
    {
        names.ANNOTATION_GPU_TOPOLOGY_MATRIX,
        names.ANNOTATION_GPU_HEALTH,
        names.ANNOTATION_MIG_LAYOUT,
        names.ANNOTATION_GPU_USE,
    }
)


@dataclass(frozen=True)
class NodeView:
    """The parts of a Node the agent reads."""

    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)
    taints: Sequence[Mapping[str, Any]] = ()
    conditions: Sequence[Mapping[str, Any]] = ()
    resource_version: str | None = None

    @classmethod
    def from_dict(cls, node: Mapping[str, Any]) -> NodeView:
        """From a Node as JSON (camelCase keys, as the API server returns it)."""
        meta = node.get("metadata") or {}
        return cls(
            labels=dict(meta.get("labels") or {}),
            annotations=dict(meta.get("annotations") or {}),
            taints=list((node.get("spec") or {}).get("taints") or []),
            conditions=list((node.get("status") or {}).get("conditions") or []),
            resource_version=meta.get("resourceVersion"),
        )

    def condition(self, kind: str) -> Mapping[str, Any] | None:
        return next((c for c in self.conditions if c.get("type") == kind), None)


@dataclass(frozen=True)
class Condition:
    status: str  # "True" | "False" | "Unknown"
    reason: str
    message: str


@dataclass(frozen=True)
class DesiredNode:
    """Labels/annotations to set (value) or remove (None); the taint's value (None: no taint);
    `manage_taint` False leaves any taint as it is (used while NVML is unavailable)."""

    labels: Mapping[str, str | None]
    annotations: Mapping[str, str | None]
    taint_reason: str | None
    condition: Condition
    manage_taint: bool = True
    label_prefixes: tuple[str, ...] = ()
    """Labels under these prefixes are ours too: a current one not in `labels` is removed."""


def desired_node(
    inventory: Inventory,
    health: NodeHealth,
    health_annotation: str | None,
    *,
    gfd_labels: bool = True,
    shared: sharing.Sharing | None = None,
    gpu_use: str | None = None,
) -> DesiredNode:
    """The full desired state from discovery, health and the device plugin's sharing config;
    `gpu_use` the latest GPU-use report (api/gpuuse.py), None: none to publish."""
    cfg = shared or sharing.Sharing()
    owned = OWN_LABELS if gfd_labels else OWN_LABELS - discovery.GFD_LABEL_KEYS
    labels: dict[str, str | None] = dict.fromkeys(owned)
    if gfd_labels:
        plain = discovery.gfd_labels(inventory)
        labels.update(plain)
        product = plain.get(names.LABEL_GPU_PRODUCT, "")
        labels.update(sharing.labels(inventory.gpus, inventory.mig, cfg, product))
    labels[names.LABEL_GPU_NVLINK] = discovery.nvlink_class(inventory)
    labels[names.LABEL_GPU_HEALTHY_COUNT] = str(health.healthy_count)
    annotations: dict[str, str | None] = {
        names.ANNOTATION_GPU_TOPOLOGY_MATRIX: discovery.topology_matrix(inventory),
        names.ANNOTATION_GPU_HEALTH: health_annotation,
        names.ANNOTATION_MIG_LAYOUT: sharing.layout(inventory.gpus, inventory.mig),
        names.ANNOTATION_GPU_USE: gpu_use,
    }
    condition = Condition("True" if health.healthy else "False", health.reason, health.message)
    return DesiredNode(
        labels,
        annotations,
        None if health.healthy else health.reason,
        condition,
        label_prefixes=discovery.GFD_LABEL_PREFIXES if gfd_labels else (),
    )


def desired_unavailable(reason: str) -> DesiredNode:
    """NVML cannot be opened: say so in the condition (Unknown) and leave everything else alone."""
    return DesiredNode(
        {},
        {},
        None,
        Condition("Unknown", names.REASON_GPU_NVML_UNAVAILABLE, reason),
        manage_taint=False,
    )


@dataclass(frozen=True)
class NodePatch:
    """`node`: merge patch for the Node, `status`: strategic merge patch for nodes/status (None when
    nothing changes); `changes`: one human line per change."""

    node: dict[str, Any] | None = None
    status: dict[str, Any] | None = None
    changes: tuple[str, ...] = ()

    @property
    def empty(self) -> bool:
        return self.node is None and self.status is None


def rfc3339(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _parse_time(value: Any) -> float | None:
    if isinstance(value, datetime):
        return value.timestamp()
    if not isinstance(value, str):
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def _diff_map(
    kind: str, current: Mapping[str, str], want: Mapping[str, str | None], changes: list[str]
) -> dict[str, str | None]:
    patch: dict[str, str | None] = {}
    for key, value in sorted(want.items()):
        old = current.get(key)
        if value is None and key in current:
            patch[key] = None
            changes.append(f"remove {kind} {key} (was {old!r})")
        elif value is not None and old != value:
            patch[key] = value
            changes.append(
                f"set {kind} {key}={value}" + (f" (was {old!r})" if old is not None else "")
            )
    return patch


def _diff_taints(
    current: Sequence[Mapping[str, Any]], reason: str | None, changes: list[str]
) -> list[dict[str, Any]] | None:
    ours = [t for t in current if t.get("key") == names.TAINT_GPU_UNHEALTHY]
    others = [dict(t) for t in current if t.get("key") != names.TAINT_GPU_UNHEALTHY]
    if reason is None:
        if not ours:
            return None
        changes.append(f"remove taint {names.TAINT_GPU_UNHEALTHY}")
        return others
    want = {"key": names.TAINT_GPU_UNHEALTHY, "value": reason, "effect": "NoSchedule"}
    if len(ours) == 1 and {k: ours[0].get(k) for k in want} == want:
        return None
    changes.append(f"set taint {names.TAINT_GPU_UNHEALTHY}={reason}:NoSchedule")
    return [*others, want]


def _diff_condition(
    current: Mapping[str, Any] | None,
    want: Condition,
    now: float,
    heartbeat_s: float,
    changes: list[str],
) -> dict[str, Any] | None:
    same = current is not None and (
        current.get("status"),
        current.get("reason"),
        current.get("message"),
    ) == (want.status, want.reason, want.message)
    last_beat = _parse_time(current.get("lastHeartbeatTime")) if current is not None else None
    stale = last_beat is None or now - last_beat >= heartbeat_s
    if same and not stale:
        return None
    transition = now
    if current is not None and current.get("status") == want.status:
        transition = _parse_time(current.get("lastTransitionTime")) or now
    if same:
        changes.append(f"refresh condition {names.NODE_CONDITION_GPU_HEALTHY} heartbeat")
    else:
        was = current.get("status") if current is not None else None
        changes.append(
            f"set condition {names.NODE_CONDITION_GPU_HEALTHY}={want.status} "
            f"reason={want.reason} (was {was}): {want.message}"
        )
    return {
        "type": names.NODE_CONDITION_GPU_HEALTHY,
        "status": want.status,
        "reason": want.reason,
        "message": want.message,
        "lastHeartbeatTime": rfc3339(now),
        "lastTransitionTime": rfc3339(transition),
    }


def diff(
    current: NodeView, desired: DesiredNode, now: float, heartbeat_s: float = 300.0
) -> NodePatch:
    """The minimal patches from `current` to `desired`; empty when the Node already matches.
    The condition's heartbeat is refreshed at most every `heartbeat_s` seconds."""
    changes: list[str] = []
    metadata: dict[str, Any] = {}
    want_labels = dict(desired.labels)
    for key in current.labels:
        if key not in want_labels and key.startswith(desired.label_prefixes or ("\0",)):
            want_labels[key] = None
    labels = _diff_map("label", current.labels, want_labels, changes)
    if labels:
        metadata["labels"] = labels
    annotations = _diff_map("annotation", current.annotations, desired.annotations, changes)
    if annotations:
        metadata["annotations"] = annotations
    node: dict[str, Any] = {}
    taints = (
        _diff_taints(current.taints, desired.taint_reason, changes)
        if desired.manage_taint
        else None
    )
    if taints is not None:
        node["spec"] = {"taints": taints}
        if current.resource_version is not None:
            metadata["resourceVersion"] = current.resource_version
    if metadata:
        node["metadata"] = metadata
    condition = _diff_condition(
        current.condition(names.NODE_CONDITION_GPU_HEALTHY),
        desired.condition,
        now,
        heartbeat_s,
        changes,
    )
    status = {"status": {"conditions": [condition]}} if condition is not None else None
    return NodePatch(node or None, status, tuple(changes))


def apply(current: NodeView, patch: NodePatch) -> NodeView:
    """The view after `patch` applies (what the API server would return): tests, dry runs."""
    labels, annotations = dict(current.labels), dict(current.annotations)
    taints, conditions = list(current.taints), list(current.conditions)
    meta = (patch.node or {}).get("metadata", {})
    for target, key in ((labels, "labels"), (annotations, "annotations")):
        for k, v in meta.get(key, {}).items():
            if v is None:
                target.pop(k, None)
            else:
                target[k] = v
    if patch.node and "spec" in patch.node:
        taints = list(patch.node["spec"]["taints"])
    if patch.status is not None:
        for cond in patch.status["status"]["conditions"]:
            conditions = [c for c in conditions if c.get("type") != cond["type"]] + [cond]
    return NodeView(labels, annotations, taints, conditions, current.resource_version)
