"""The enforcement loop's decision: what an admitted Workload's running pods hold beyond what
its admission granted. Pure; `enforce_loop.py` feeds it from the pod watch and acts on it.

The webhooks refuse every known way to run more than was admitted; this compares what runs
with what was admitted, so a way nobody listed is caught too. It reads only what the controller
wrote (the Workload's admission, the flavors) and what the API server decides (which pods are
bound where, what they request, the nodes' labels), never a pod's own annotations:

- pods: more of the Workload's pods run than its admission counts (in all, and per pod set
  where a pod's pod set can be told from its spec: plain pod groups);
- gpus: the pods ask for more GPUs (nvidia.com/gpu, plus any flavor's stand-in device) than
  the admission's resourceUsage, in all and per GPU flavor;
- flavor: a pod runs on a node that carries none of its admitted flavors' nodeLabels;
- unadmitted: a plain pod group's pods run while no admission stands behind them (its Workload
  is gone, or was made again under the same name and waits), `without_quota`.

Only pods that hold a node count: bound, not finished, not being deleted. Pods being replaced
(a failed one and its successor, a JobSet restarting) are fine while the count is within the
admission; a node or flavor the cache has not seen yet is not judged.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from queuectl import convert
from queuectl.api import names
from queuectl.api.quantity import canonical
from queuectl.api.resource import Obj
from queuectl.api.views import ObjectView, WorkloadView

PODS: Final = "pods"
POD_SET: Final = "podSet"
GPUS: Final = "gpus"
FLAVOR: Final = "flavor"
UNADMITTED: Final = "unadmitted"
KINDS: Final = (PODS, POD_SET, GPUS, FLAVOR, UNADMITTED)
"""Each excess's kind, also the metric's `reason` label."""


@dataclass(frozen=True)
class Excess:
    """One way the pods exceed the admission: which pods (the newest beyond it) and why."""

    kind: str
    pods: tuple[str, ...]
    detail: str
    alike: tuple[str, ...] = ()
    """Pods created in the same second as the oldest of `pods` (creationTimestamp has second
    resolution): any of them may be the one beyond, so the message names them too."""


def _meta(obj: Obj) -> Mapping[str, Any]:
    meta: Mapping[str, Any] = ObjectView(obj).meta
    return meta


def counts(pod: Obj) -> bool:
    """Whether a pod holds a node now: bound, not finished, not being deleted."""
    return (
        bool(ObjectView(pod).spec.get("nodeName"))
        and ObjectView(pod).status.get("phase") not in ("Succeeded", "Failed")
        and not _meta(pod).get("deletionTimestamp")
    )


def gpu_names(flavors: Iterable[Obj]) -> frozenset[str]:
    """nvidia.com/gpu and every device a flavor serves it with (`spec.gpuResource`)."""
    out = {names.RESOURCE_GPU}
    for fl in flavors:
        if device := ObjectView(fl).spec.get("gpuResource"):
            out.add(str(device))
    return frozenset(out)


def _is_device(resource: str, devices: frozenset[str]) -> bool:
    """A GPU or a slice of one: compared per device name (a job may ask for a slice itself)."""
    return resource in devices or resource.startswith(_NVIDIA)


_NVIDIA: Final = "nvidia.com/"


def pod_devices(pod: Obj, devices: frozenset[str]) -> dict[str, int]:
    """What GPU devices one pod asks for, by resource name."""
    try:
        requests = convert.pod_requests(ObjectView(pod).spec)
    except (ValueError, TypeError):
        return {}
    return {r: v for r, v in requests.items() if v and _is_device(r, devices)}


def pod_gpus(pod: Obj, devices: frozenset[str]) -> int:
    """GPU devices of any kind one pod asks for, summed (a cheap running total)."""
    return sum(pod_devices(pod, devices).values())


def admitted_devices(workload: Obj, flavors: Mapping[str, Obj]) -> dict[tuple[str, str], int]:
    """(flavor, device) -> how many the admission granted: its resourceUsage of each GPU
    device, nvidia.com/gpu named as the device its flavor serves it with (`gpuResource`: the
    pods ask for that once placed)."""
    devices = gpu_names(flavors.values())
    admission = WorkloadView(workload).admission or {}
    out: dict[tuple[str, str], int] = defaultdict(int)
    for psa in admission.get("podSetAssignments") or ():
        psa_flavors = psa.get("flavors") or {}
        for res, qty in (psa.get("resourceUsage") or {}).items():
            if not _is_device(str(res), devices):
                continue
            flavor = str(psa_flavors.get(res, ""))
            device = str(res)
            if res == names.RESOURCE_GPU:
                device = ObjectView(flavors.get(flavor) or {}).spec.get("gpuResource") or res
            out[(flavor, str(device))] += canonical(str(res), qty)
    return dict(out)


def _matches(node: Obj, flavor: Obj) -> bool:
    labels = _meta(node).get("labels") or {}
    want = ObjectView(flavor).spec.get("nodeLabels") or {}
    return all(labels.get(k) == v for k, v in want.items())


def _newest_first(pods: Iterable[Obj]) -> list[Obj]:
    return sorted(
        pods,
        key=lambda p: (str(_meta(p).get("creationTimestamp") or ""), str(_meta(p).get("name"))),
        reverse=True,
    )


def _alike(pods: Sequence[Obj], chosen: Sequence[str]) -> tuple[str, ...]:
    """The pods not chosen that are as new as the oldest chosen one."""
    stamp = {str(_meta(p).get("name")): str(_meta(p).get("creationTimestamp") or "") for p in pods}
    if not chosen:
        return ()
    oldest = min(stamp[name] for name in chosen)
    return tuple(sorted(n for n, t in stamp.items() if t == oldest and n not in chosen))


def _beyond(pods: Sequence[Obj], allowed: int) -> tuple[str, ...]:
    """The newest pods past the first `allowed` (oldest first), by name."""
    extra = _newest_first(pods)[: max(0, len(pods) - allowed)]
    return tuple(sorted(str(_meta(p).get("name")) for p in extra))


def _over(pods: Sequence[Obj], gpus: Mapping[str, int], allowed: int) -> tuple[str, ...]:
    """The newest pods asking for the device whose requests take the total past `allowed`."""
    total = sum(gpus.get(str(_meta(p).get("name")), 0) for p in pods)
    out = []
    for pod in _newest_first(pods):
        if total <= allowed:
            break
        name = str(_meta(pod).get("name"))
        if gpus.get(name):
            out.append(name)
            total -= gpus[name]
    return tuple(sorted(out))


def excess(
    workload: Obj,
    pods: Iterable[Obj],
    nodes: Mapping[str, Obj],
    flavors: Mapping[str, Obj],
    pod_set_of: Callable[[Obj], str | None] | None = None,
) -> list[Excess]:
    """Every way `pods` (the Workload's, as the pod watch maps them) exceed its admission.
    `nodes` and `flavors` by name; `pod_set_of` tells a pod's pod set from its spec where the
    kind allows (None: not known)."""
    admission = WorkloadView(workload).admission or {}
    assignments = admission.get("podSetAssignments") or ()
    if not assignments:
        return []
    live = [p for p in pods if counts(p)]
    devices = gpu_names(flavors.values())
    asked = {str(_meta(p).get("name")): pod_devices(p, devices) for p in live}
    spec_counts = {
        str(ps.get("name")): int(ps.get("count", 1)) for ps in WorkloadView(workload).pod_sets
    }
    admitted: dict[str, int] = {}
    used_flavors: set[str] = set()
    for psa in assignments:
        name = str(psa.get("name"))
        admitted[name] = int(psa.get("count", spec_counts.get(name, 0)))
        used_flavors.update(str(f) for f in (psa.get("flavors") or {}).values())
    granted = admitted_devices(workload, flavors)
    found: list[Excess] = []
    total = sum(admitted.values())
    if len(live) > total:
        extra = _beyond(live, total)
        found.append(
            Excess(PODS, extra, f"{len(live)} pods run, {total} admitted", _alike(live, extra))
        )
    if pod_set_of is not None:
        by_set: dict[str, list[Obj]] = defaultdict(list)
        for pod in live:
            if (ps := pod_set_of(pod)) is not None:
                by_set[ps].append(pod)
        for ps, members in sorted(by_set.items()):
            if len(members) > admitted.get(ps, 0):
                extra = _beyond(members, admitted.get(ps, 0))
                found.append(
                    Excess(
                        POD_SET,
                        extra,
                        f"pod set {ps}: {len(members)} pods run, {admitted.get(ps, 0)} admitted",
                        _alike(members, extra),
                    )
                )
    for device in sorted({d for a in asked.values() for d in a}):
        want = {p: a.get(device, 0) for p, a in asked.items()}
        allowed = sum(n for (_, d), n in granted.items() if d == device)
        if sum(want.values()) > allowed:
            extra = _over(live, want, allowed)
            asking = [p for p in live if want.get(str(_meta(p).get("name")))]
            found.append(
                Excess(
                    GPUS,
                    extra,
                    f"the pods ask for {sum(want.values())} {device}, {allowed} admitted",
                    _alike(asking, extra),
                )
            )
    found += _placement(live, asked, granted, used_flavors, nodes, flavors)
    return found


def _placement(
    live: Sequence[Obj],
    asked: Mapping[str, Mapping[str, int]],
    granted: Mapping[tuple[str, str], int],
    used_flavors: set[str],
    nodes: Mapping[str, Obj],
    flavors: Mapping[str, Obj],
) -> list[Excess]:
    """Pods on nodes of none of their admitted flavors, and, where one device was admitted on
    several flavors, more of it than a flavor's share on the nodes only that flavor describes."""
    if any(f not in flavors for f in used_flavors):
        return []  # a flavor the cache has not seen: nothing to judge by
    device_flavors: dict[str, list[str]] = defaultdict(list)
    for (flavor, device), n in sorted(granted.items()):
        if n and flavor in flavors:
            device_flavors[device].append(flavor)
    elsewhere: list[str] = []
    only: dict[tuple[str, str], list[Obj]] = defaultdict(list)
    for pod in live:
        name = str(_meta(pod).get("name"))
        node = nodes.get(str(ObjectView(pod).spec.get("nodeName")))
        if node is None:
            continue
        if not asked[name]:
            if used_flavors and not any(_matches(node, flavors[f]) for f in used_flavors):
                elsewhere.append(name)
            continue
        for device in asked[name]:
            matching = [f for f in device_flavors.get(device, ()) if _matches(node, flavors[f])]
            if device_flavors.get(device) and not matching:
                elsewhere.append(name)
            elif len(matching) == 1 and len(device_flavors[device]) > 1:
                only[(matching[0], device)].append(pod)
    found = []
    if elsewhere:
        found.append(
            Excess(
                FLAVOR,
                tuple(sorted(set(elsewhere))),
                "pods run on nodes of none of the admitted flavors "
                f"({', '.join(sorted(used_flavors))})",
            )
        )
    for (flavor, device), members in sorted(only.items()):
        want = {
            str(_meta(p).get("name")): asked[str(_meta(p).get("name"))][device] for p in members
        }
        if sum(want.values()) > granted[(flavor, device)]:
            found.append(
                Excess(
                    GPUS,
                    _over(members, want, granted[(flavor, device)]),
                    f"flavor {flavor}: the pods on its nodes ask for {sum(want.values())} "
                    f"{device}, {granted[(flavor, device)]} admitted",
                )
            )
    return found


def without_quota(workload: Obj | None, pods: Iterable[Obj], group: bool) -> Excess | None:
    """A plain pod group's pods that hold a node while its Workload holds no quota (deleted, or
    made again under the same name and waiting): they were ungated by an admission that is no
    more, and a bare pod has no suspend and no operator that stops it. Job kinds' pods are not
    judged here: the reconciler suspends a job whose Workload is not admitted."""
    if not group or (workload is not None and WorkloadView(workload).holds_quota):
        return None
    live = sorted(str(_meta(p).get("name")) for p in pods if counts(p))
    if not live:
        return None
    why = "is gone" if workload is None else "holds no quota"
    return Excess(UNADMITTED, tuple(live), f"{len(live)} pods run while their Workload {why}")


def describe(found: Sequence[Excess], limit: int = 10) -> str:
    """The excesses in words, naming at most `limit` pods."""

    def listed(pods: set[str]) -> str:
        named = sorted(pods)
        more = f" and {len(named) - limit} more" if len(named) > limit else ""
        return ", ".join(named[:limit]) + more

    named = {p for e in found for p in e.pods}
    alike = {p for e in found for p in e.alike} - named
    also = f"; or, created in the same second: {listed(alike)}" if alike else ""
    return f"{'; '.join(e.detail for e in found)} (pods: {listed(named) or 'none named'}{also})"
