"""What pods outside queuectl take on each node: GPUs, CPU, memory and pod slots.

The core places gangs on nodes from their allocatable minus what it has placed itself; a
DaemonSet, a notebook pod or a Job nobody queued that holds GPUs on a node would otherwise be
invisible, and a gang placed there would sit Pending. Only bound, unfinished pods are watched
(the cache's field selector); a pod counts as queuectl's when it or a controller above it carries
the queue or workload label (podowners.py), whatever its kind.
"""

from __future__ import annotations

from collections.abc import Callable

from queuectl import convert
from queuectl.api import names
from queuectl.controller import kube as k
from queuectl.controller.cache import Cache
from queuectl.controller.kube import Obj
from queuectl.controller.podowners import Owners, is_ours
from queuectl.controller.watcher import Key, key_of

Usage = dict[str, int]


def foreign_usage(pod: Obj, owners: Owners) -> tuple[str, Usage] | None:
    """(node, what the pod takes there) for a bound, unfinished pod that is not queuectl's
    (`podowners.is_ours`: the queue or workload label on it or on a controller above it)."""
    spec, status = pod.get("spec") or {}, pod.get("status") or {}
    node = spec.get("nodeName")
    if not node or status.get("phase") in ("Succeeded", "Failed"):
        return None
    if names.LABEL_PLACEHOLDER_FOR in ((pod.get("metadata") or {}).get("labels") or {}):
        return None  # the provisioning check's placeholder: it gives way to any pod
    if is_ours(pod, owners):
        return None
    try:
        usage = convert.pod_requests(spec)
    except (ValueError, TypeError):
        usage = {}
    usage["pods"] = 1
    return str(node), usage


class ForeignPods:
    """Per-node totals of foreign pods, kept current by the pod watch; `on_node(name)` is called
    when a node's total changes."""

    def __init__(self, cache: Cache, on_node: Callable[[str], None]) -> None:
        self.cache = cache
        self.on_node = on_node
        self.owners = cache.pod_owners()
        self._pods: dict[Key, tuple[str, Usage]] = {}
        self._nodes: dict[str, Usage] = {}
        cache.store(k.PODS).listeners.append(self._pod)

    def used(self, node: str) -> Usage:
        return dict(self._nodes.get(node) or {})

    def _pod(self, kind: str, obj: Obj, old: Obj | None) -> None:
        key = key_of(obj)
        new = None if kind == "DELETED" else foreign_usage(obj, self.owners)
        prev = self._pods.get(key)
        if prev == new:
            return
        if prev is not None:
            self._add(prev, -1)
            del self._pods[key]
        if new is not None:
            self._pods[key] = new
            self._add(new, 1)
        for node in {x[0] for x in (prev, new) if x is not None}:
            self.on_node(node)

    def _add(self, entry: tuple[str, Usage], sign: int) -> None:
        node, usage = entry
        total = self._nodes.setdefault(node, {})
        for res, v in usage.items():
            total[res] = total.get(res, 0) + sign * v
            if total[res] == 0:
                del total[res]
        if not total:
            del self._nodes[node]
