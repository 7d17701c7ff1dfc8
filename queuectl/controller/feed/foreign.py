"""What pods outside queuectl take on each node: GPUs, CPU, memory and pod slots.

The core places gangs on nodes from their allocatable minus what it has placed itself; a
DaemonSet, a notebook pod or a Job nobody queued that holds GPUs on a node would otherwise be
invisible, and a gang placed there would sit Pending. Only bound, unfinished pods are watched
(the cache's field selector). A pod is queuectl's only when a Workload holding quota stands
behind it (`podowners.is_ours`); every other running pod is foreign, whatever labels it
carries: a ReplicaSet's pod with a queue label takes its GPUs as surely as any other.

Whether a pod is ours changes with its Workload too (admitted, released, deleted, or seen
after the pod when the caches fill at start), so the pods claiming each Workload are indexed
and classified again on that Workload's events.
"""

from __future__ import annotations

from collections.abc import Callable

from queuectl import convert
from queuectl.api import names
from queuectl.api.views import ObjectView, WorkloadView
from queuectl.controller.watch import kube as k
from queuectl.controller.watch.cache import Cache
from queuectl.controller.watch.kube import Obj
from queuectl.controller.watch.podowners import Owners, claim, is_ours
from queuectl.controller.watch.watcher import Key, key_of

Usage = dict[str, int]
Holds = Callable[[str], bool]
"""holds(workload key): the Workload is cached and holds quota."""


def foreign_usage(pod: Obj, owners: Owners, holds: Holds) -> tuple[str, Usage] | None:
    """(node, what the pod takes there) for a bound, unfinished pod that is not queuectl's
    (`podowners.is_ours`: a Workload holding quota stands behind it)."""
    view = ObjectView(pod)
    spec, status = view.spec, view.status
    node = spec.get("nodeName")
    if not node or status.get("phase") in ("Succeeded", "Failed"):
        return None
    if names.LABEL_PLACEHOLDER_FOR in view.labels:
        return None  # the provisioning check's placeholder: it gives way to any pod
    if is_ours(pod, owners, holds):
        return None
    try:
        usage = convert.pod_requests(spec)
    except (ValueError, TypeError):
        usage = {}
    usage["pods"] = 1
    return str(node), usage


def holds_in(cache: Cache) -> Holds:
    """`Holds` answered from the cache's Workloads."""

    def holds(key: str) -> bool:
        ns, _, name = key.partition("/")
        wl = cache.get(k.WORKLOADS, name, ns) if k.WORKLOADS.plural in cache.stores else None
        return wl is not None and WorkloadView(wl).holds_quota

    return holds


class ForeignPods:
    """Per-node totals of foreign pods, kept current by the pod and Workload watches;
    `on_node(name)` is called when a node's total changes."""

    def __init__(self, cache: Cache, on_node: Callable[[str], None]) -> None:
        self.cache = cache
        self.on_node = on_node
        self.owners = cache.pod_owners()
        self.holds = holds_in(cache)
        self._pods: dict[Key, tuple[str, Usage]] = {}
        self._nodes: dict[str, Usage] = {}
        self._claims: dict[str, set[Key]] = {}
        """Workload key -> the watched pods whose chain names it."""
        self._claimed: dict[Key, str] = {}
        cache.store(k.PODS).listeners.append(self._pod)
        if k.WORKLOADS.plural in cache.stores:
            cache.store(k.WORKLOADS).listeners.append(self._workload)

    def used(self, node: str) -> Usage:
        return dict(self._nodes.get(node) or {})

    def _pod(self, kind: str, obj: Obj, old: Obj | None) -> None:
        key = key_of(obj)
        self._index(key, None if kind == "DELETED" else claim(obj, self.owners).workload)
        new = None if kind == "DELETED" else foreign_usage(obj, self.owners, self.holds)
        self._set(key, new)

    def _workload(self, kind: str, obj: Obj, old: Obj | None) -> None:
        held = kind != "DELETED" and WorkloadView(obj).holds_quota
        if old is not None and kind != "ADDED" and WorkloadView(old).holds_quota == held:
            return
        pods = self.cache.store(k.PODS)
        for key in sorted(self._claims.get(WorkloadView(obj).key, ())):
            pod = pods.get(*key)
            if pod is not None:
                self._set(key, foreign_usage(pod, self.owners, self.holds))

    def _index(self, key: Key, workload: str | None) -> None:
        prev = self._claimed.pop(key, None)
        if prev is not None:
            self._claims[prev].discard(key)
            if not self._claims[prev]:
                del self._claims[prev]
        if workload is not None:
            self._claimed[key] = workload
            self._claims.setdefault(workload, set()).add(key)

    def _set(self, key: Key, new: tuple[str, Usage] | None) -> None:
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
