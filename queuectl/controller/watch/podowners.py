"""Pod -> Workload for every kind: the pod's own labels, else its controllers' through the cache.

A pod is queuectl's when a Workload stands behind it: the `queuectl.io/workload` label the
controller wrote, on the pod or on an object above it on its chain of controller
ownerReferences (each step uid-checked against the cached object), names a Workload that holds
quota. Plain pod groups (and any pod our webhook labels) carry the label themselves; a Job's pod
finds it on its Job; a JobSet's pod on the JobSet two steps up (pod -> child Job -> JobSet).
The walk goes through the objects the cache holds (batch Jobs and every registered job kind),
by Kind: kind names are unique in the registry. A controller of a kind the cache does not hold
(a ReplicaSet, a StatefulSet) ends the walk. The queue label says nothing: anyone may put it
on any pod, and a queued object's pods run only once its Workload is admitted.

Used by the drainer (which Workload has pods on a bad node), by the foreign-pod count (which
pods queuectl did not place) and by the enforcement loop (which pods each Workload runs), so
none of them knows any kind.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from queuectl.api import names
from queuectl.api.resource import Obj, Resource
from queuectl.api.views import ObjectView

MAX_DEPTH: Final = 4
"""Controllers followed above a pod; the deepest real chain (pod -> Job -> JobSet) has two."""


@dataclass(frozen=True)
class Chain:
    """What a pod's walk found: the objects (pod first) and whether it stopped at an owner of a
    held kind that the cache has not seen (yet), or that is a newer object of the same name."""

    objects: tuple[Obj, ...]
    unresolved: bool


class Owners:
    """Resolves an ownerReference to the cached object, for the kinds the cache holds."""

    def __init__(
        self, get: Callable[[Resource, str, str], Obj | None], resources: Iterable[Resource]
    ) -> None:
        self.get = get
        self.by_kind: dict[str, Resource] = {r.kind: r for r in resources}

    def held(self, ref: Mapping[str, Any]) -> Resource | None:
        return self.by_kind.get(str(ref.get("kind") or ""))

    def chain(self, pod: Obj) -> Chain:
        objects = [pod]
        obj = pod
        for _ in range(MAX_DEPTH):
            ref = _controller(obj)
            if ref is None or (res := self.held(ref)) is None:
                return Chain(tuple(objects), False)
            ns = ObjectView(pod).namespace
            found = self.get(res, str(ref.get("name") or ""), ns)
            uid = ref.get("uid")
            if found is None or (uid and ObjectView(found).meta.get("uid") != uid):
                return Chain(tuple(objects), True)
            objects.append(found)
            obj = found
        return Chain(tuple(objects), False)


def _controller(obj: Obj) -> Mapping[str, Any] | None:
    ref = ObjectView(obj).controller_ref
    return None if ref is None else dict(ref)


def finished(pod: Obj) -> bool:
    return ObjectView(pod).status.get("phase") in ("Succeeded", "Failed")


@dataclass(frozen=True)
class Claim:
    """The Workload a pod's verified chain names (`ns/name`, or None), and whether the walk
    stopped at an owner the cache has not seen (yet)."""

    workload: str | None
    unresolved: bool


def claim(pod: Obj, owners: Owners) -> Claim:
    """The nearest `queuectl.io/workload` label on the pod or its verified controllers."""
    chain = owners.chain(pod)
    ns = ObjectView(pod).namespace
    for obj in chain.objects:
        if wl := ObjectView(obj).labels.get(names.LABEL_WORKLOAD):
            return Claim(f"{ns}/{wl}", chain.unresolved)
    return Claim(None, chain.unresolved)


def pod_workload(pod: Obj, owners: Owners) -> str | None:
    """The key of the Workload behind an unfinished pod: the nearest `queuectl.io/workload`
    label on the pod or its controllers; None for a pod no queued object stands behind."""
    if finished(pod):
        return None
    return claim(pod, owners).workload


def is_ours(pod: Obj, owners: Owners, holds: Callable[[str], bool]) -> bool:
    """Whether queuectl placed this pod: its chain names a Workload (`claim`) for which
    `holds(key)` (the Workload is cached and holds quota). A walk that stops at an owner the
    cache has not seen yet counts as ours for now (its next event classifies the pod again),
    so a queued gang's own pods are never counted twice; an owner that is gone for good is
    the garbage collector's, which deletes the pods of a dangling controller reference."""
    found = claim(pod, owners)
    if found.unresolved:
        return True
    return found.workload is not None and holds(found.workload)
