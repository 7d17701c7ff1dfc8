"""Nodes that fail otherwise than by a GPU: not Ready, unreachable, or an agent gone silent.

Pure decisions for the drainer (`drain.py`), each read off the Node as the API serves it, so a
restarted controller reaches the same verdict:

- a node is *failed* once its `Ready` condition has been False or Unknown (or it has carried
  the node lifecycle controller's `not-ready`/`unreachable` taint) for longer than the node
  failure time; it is then drained like a node with a bad GPU;
- a pod on a failed node whose deletion deadline has passed will never be confirmed by its
  kubelet: it is *stuck*, and is force-deleted so its job's controller can count it gone;
- a node whose agent has written `GPUHealthy` before but has not refreshed its heartbeat for
  longer than the silence time has GPUs nobody vouches for: *unknown*, tainted NoSchedule by
  the controller (no eviction on that alone).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from queuectl import convert
from queuectl.api import names
from queuectl.api.views import ObjectView
from queuectl.controller.watch.kube import Obj

NODE_FAILURE_REASONS = frozenset({names.REASON_NODE_NOT_READY, names.REASON_NODE_UNREACHABLE})
"""Drain reasons that mean the node itself failed (its kubelet cannot be relied on)."""


@dataclass(frozen=True, slots=True)
class NotReady:
    reason: str
    """`NodeUnreachable` (the kubelet stopped reporting) or `NodeNotReady`."""
    since: float | None
    """When the node stopped being Ready, as the API says (None when it does not say)."""


def _time(value: Any) -> float | None:
    with contextlib.suppress(ValueError, TypeError):
        return convert.parse_time(value)
    return None


def not_ready(node: Obj) -> NotReady | None:
    """How and since when the node is not Ready; None while it is Ready, or before its kubelet
    ever reported (a node being created is not a failed one)."""
    view = ObjectView(node)
    ready = next((c for c in view.conditions if c.get("type") == "Ready"), None)
    taints = {
        t.get("key"): t
        for t in view.spec.get("taints") or ()
        if t.get("key") in (names.TAINT_NODE_NOT_READY, names.TAINT_NODE_UNREACHABLE)
    }
    if ready is not None and ready.get("status") == "True":
        return None
    if ready is None and not taints:
        return None
    unreachable = names.TAINT_NODE_UNREACHABLE in taints or (
        ready is not None and ready.get("status") == "Unknown"
    )
    times = [_time(t.get("timeAdded")) for t in taints.values()]
    if ready is not None:
        times.append(_time(ready.get("lastTransitionTime")))
    known = [t for t in times if t is not None]
    return NotReady(
        names.REASON_NODE_UNREACHABLE if unreachable else names.REASON_NODE_NOT_READY,
        min(known) if known else None,
    )


def failed(state: NotReady | None, now: float, first_seen: float, failure_s: float) -> bool:
    """Whether a node not Ready since `state.since` (or, when the API gives no time, since we
    first saw it so: `first_seen`) has been so for longer than `failure_s`."""
    if state is None:
        return False
    since = state.since if state.since is not None else first_seen
    return now - since > failure_s


def stuck_pods(pods: Iterable[Obj], node_name: str, now: float) -> list[Obj]:
    """Pods bound to the node whose deletion deadline (deletionTimestamp: the request time plus
    the pod's grace period) has passed: on a failed node no kubelet will ever confirm them."""
    out = []
    for pod in pods:
        if ObjectView(pod).spec.get("nodeName") != node_name:
            continue
        deadline = _time(pod["metadata"].get("deletionTimestamp"))
        if deadline is not None and deadline <= now:
            out.append(pod)
    return out


def heartbeat(node: Obj) -> float | None:
    """When the node agent last refreshed its GPUHealthy condition; None without an agent."""
    for c in ObjectView(node).conditions:
        if c.get("type") == names.NODE_CONDITION_GPU_HEALTHY:
            return _time(c.get("lastHeartbeatTime"))
    return None


def agent_silent(node: Obj, now: float, silence_s: float) -> bool:
    """The node's agent wrote a heartbeat once and has not refreshed it for `silence_s`."""
    beat = heartbeat(node)
    return beat is not None and now - beat > silence_s


def unknown_taint(node: Obj) -> Mapping[str, Any] | None:
    taints: Iterable[Mapping[str, Any]] = ObjectView(node).spec.get("taints") or ()
    return next((t for t in taints if t.get("key") == names.TAINT_GPU_UNKNOWN), None)


def with_unknown_taint(node: Obj, on: bool) -> list[dict[str, Any]]:
    """The node's taints with ours added (`on`) or removed, the others kept as they are."""
    kept = [
        dict(t)
        for t in ObjectView(node).spec.get("taints") or ()
        if t.get("key") != names.TAINT_GPU_UNKNOWN
    ]
    if on:
        kept.append(
            {
                "key": names.TAINT_GPU_UNKNOWN,
                "value": names.REASON_AGENT_SILENT,
                "effect": "NoSchedule",
            }
        )
    return kept
