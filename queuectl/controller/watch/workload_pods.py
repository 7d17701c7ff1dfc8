"""Each Workload's running pods and which of them are Ready, from the pod watch.

Read by the pods-ready timeouts (how many are Ready), by the preemption notice (which pods
to tell, `workloads/notice.py`) and by the enforcement loop (which pods each Workload runs;
it subscribes to every pod's move, `subscribers`), so a pod's owner chain is walked once per
pod event, not once per reader.

The pods-ready timeouts (`workloads/pods_ready.py`) ask how many of an admitted Workload's
pods are Ready, and want to hear when that changes, for every kind alike: so the answer is
read from the pods (bound, unfinished, through `podowners.claim`), not from each kind's status.
`on_change(workload key)` is called when one of a Workload's pods becomes Ready, stops being
Ready, or goes while Ready (not for every pod update: a gang of 64 pods wakes its Workload
about 64 times while it starts, and not again while it runs).

A pod whose owner the cache has not seen yet is not counted until its next event; a decision
that would stop a Workload asks `recount`, which walks the namespace's pods again.
"""

from __future__ import annotations

from collections.abc import Callable

from queuectl.api.views import ObjectView
from queuectl.controller.watch import kube as k
from queuectl.controller.watch.cache import Cache
from queuectl.controller.watch.kube import Obj
from queuectl.controller.watch.podowners import claim, finished
from queuectl.controller.watch.watcher import Key, key_of

PodMove = Callable[[Obj, str | None, str | None], None]
"""subscriber(pod, Workload before, Workload after): called on every pod event, after the
index took it in; None where the pod was (or is now) no Workload's counted pod."""


def is_ready(pod: Obj) -> bool:
    """Bound, unfinished, not being deleted, and its Ready condition True."""
    view = ObjectView(pod)
    if not view.spec.get("nodeName") or finished(pod) or view.deleting:
        return False
    return any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in view.status.get("conditions") or ()
    )


class WorkloadPods:
    def __init__(self, cache: Cache, on_change: Callable[[str], None]) -> None:
        self.cache = cache
        self.owners = cache.pod_owners()
        self.on_change = on_change
        self._of: dict[Key, str] = {}
        """Pod -> the Workload its chain names."""
        self._ready: dict[str, dict[Key, bool]] = {}
        """Workload key -> its bound, unfinished pods, each with whether it is Ready."""
        self.subscribers: list[PodMove] = []
        cache.store(k.PODS).listeners.append(self._on_pod)

    def count(self, wl_key: str) -> int:
        """`wl_key`'s bound, unfinished pods."""
        return len(self._ready.get(wl_key) or ())

    def workload_of(self, key: Key) -> str | None:
        return self._of.get(key)

    def reindex(self) -> None:
        """Walk the owner chains of the pods left out so far (their owner arrived after them)."""
        for pod in self.cache.store(k.PODS).values():
            if key_of(pod) not in self._of:
                self._taken(pod, self._index(pod))

    def ready(self, wl_key: str) -> int:
        return sum(1 for r in (self._ready.get(wl_key) or {}).values() if r)

    def pods(self, wl_key: str) -> list[Obj]:
        """`wl_key`'s bound, unfinished pods as the cache holds them now (the preemption
        notice is written on each)."""
        store = self.cache.store(k.PODS)
        found = (store.objects.get(key) for key in self._ready.get(wl_key) or ())
        return [pod for pod in found if pod is not None]

    def recount(self, wl_key: str) -> int:
        """Ready pods of `wl_key`, walking its namespace's pods again (for a pod whose owner
        arrived after it); the index is brought up to date on the way."""
        namespace = wl_key.partition("/")[0]
        for pod in self.cache.store(k.PODS).values():
            if ObjectView(pod).namespace == namespace and key_of(pod) not in self._of:
                self._taken(pod, self._index(pod))
        return self.ready(wl_key)

    def _taken(self, pod: Obj, found: tuple[str, bool] | None) -> None:
        """Tell the subscribers of a pod the index took in outside of its event."""
        if found is not None:
            for subscriber in self.subscribers:
                subscriber(pod, None, found[0])

    def _on_pod(self, kind: str, obj: Obj, old: Obj | None) -> None:
        key = key_of(obj)
        before = self._forget(key)
        after = None if kind == "DELETED" else self._index(obj)
        wl_before, was = before if before else (None, False)
        wl_after, now = after if after else (None, False)
        if wl_before is not None and was and (wl_after != wl_before or not now):
            self.on_change(wl_before)  # a Ready pod stopped being Ready, or went
        if wl_after is not None and now and (wl_after != wl_before or not was):
            self.on_change(wl_after)  # a pod became Ready
        if wl_before is not None or wl_after is not None:
            for subscriber in self.subscribers:
                subscriber(obj, wl_before, wl_after)

    def _forget(self, key: Key) -> tuple[str, bool] | None:
        wl_key = self._of.pop(key, None)
        if wl_key is None:
            return None
        pods = self._ready.get(wl_key) or {}
        was = pods.pop(key, False)
        if not pods:
            self._ready.pop(wl_key, None)
        return wl_key, was

    def _index(self, pod: Obj) -> tuple[str, bool] | None:
        view = ObjectView(pod)
        if not view.spec.get("nodeName") or finished(pod) or view.deleting:
            return None
        found = claim(pod, self.owners)
        if found.unresolved or found.workload is None:
            return None
        key, ready = key_of(pod), is_ready(pod)
        self._of[key] = found.workload
        self._ready.setdefault(found.workload, {})[key] = ready
        return found.workload, ready
