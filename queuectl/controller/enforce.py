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
- flavor: a pod runs on a node that carries none of its admitted flavors' nodeLabels.

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

PODS: Final = "pods"
POD_SET: Final = "podSet"
GPUS: Final = "gpus"
FLAVOR: Final = "flavor"
KINDS: Final = (PODS, POD_SET, GPUS, FLAVOR)
"""Each excess's kind, also the metric's `reason` label."""


@dataclass(frozen=True)
class Excess:
    """One way the pods exceed the admission: which pods (the newest beyond it) and why."""

    kind: str
    pods: tuple[str, ...]
    detail: str


def _meta(obj: Obj) -> Mapping[str, Any]:
    meta: Mapping[str, Any] = obj.get("metadata") or {}
    return meta


def counts(pod: Obj) -> bool:
    """Whether a pod holds a node now: bound, not finished, not being deleted."""
    return (
        bool((pod.get("spec") or {}).get("nodeName"))
        and (pod.get("status") or {}).get("phase") not in ("Succeeded", "Failed")
        and not _meta(pod).get("deletionTimestamp")
    )


def gpu_names(flavors: Iterable[Obj]) -> frozenset[str]:
    """nvidia.com/gpu and every device a flavor serves it with (`spec.gpuResource`)."""
    out = {names.RESOURCE_GPU}
    for fl in flavors:
        if device := (fl.get("spec") or {}).get("gpuResource"):
            out.add(str(device))
    return frozenset(out)


def pod_gpus(pod: Obj, gpu_resources: frozenset[str]) -> int:
    try:
        requests = convert.pod_requests(pod.get("spec") or {})
    except (ValueError, TypeError):
        return 0
    return sum(v for r, v in requests.items() if r in gpu_resources)


def _matches(node: Obj, flavor: Obj) -> bool:
    labels = _meta(node).get("labels") or {}
    want = (flavor.get("spec") or {}).get("nodeLabels") or {}
    return all(labels.get(k) == v for k, v in want.items())


def _newest_first(pods: Iterable[Obj]) -> list[Obj]:
    return sorted(
        pods,
        key=lambda p: (str(_meta(p).get("creationTimestamp") or ""), str(_meta(p).get("name"))),
        reverse=True,
    )


def _beyond(pods: Sequence[Obj], allowed: int) -> tuple[str, ...]:
    """The newest pods past the first `allowed` (oldest first), by name."""
    extra = _newest_first(pods)[: max(0, len(pods) - allowed)]
    return tuple(sorted(str(_meta(p).get("name")) for p in extra))


def _over_gpus(pods: Sequence[Obj], gpus: Mapping[str, int], allowed: int) -> tuple[str, ...]:
    """The newest GPU pods whose GPUs take the total past `allowed`."""
    total = sum(gpus[str(_meta(p).get("name"))] for p in pods)
    out = []
    for pod in _newest_first(pods):
        if total <= allowed:
            break
        name = str(_meta(pod).get("name"))
        if gpus[name]:
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
    admission = (workload.get("status") or {}).get("admission") or {}
    assignments = admission.get("podSetAssignments") or ()
    if not assignments:
        return []
    live = [p for p in pods if counts(p)]
    gpu_resources = gpu_names(flavors.values())
    gpus = {str(_meta(p).get("name")): pod_gpus(p, gpu_resources) for p in live}
    spec_counts = {
        str(ps.get("name")): int(ps.get("count", 1))
        for ps in (workload.get("spec") or {}).get("podSets") or ()
    }
    admitted: dict[str, int] = {}
    gpus_by_flavor: dict[str, int] = defaultdict(int)
    used_flavors: set[str] = set()
    for psa in assignments:
        name = str(psa.get("name"))
        admitted[name] = int(psa.get("count", spec_counts.get(name, 0)))
        psa_flavors = psa.get("flavors") or {}
        used_flavors.update(str(f) for f in psa_flavors.values())
        usage = (psa.get("resourceUsage") or {}).get(names.RESOURCE_GPU)
        if usage is not None:
            gpu_flavor = str(psa_flavors.get(names.RESOURCE_GPU, ""))
            gpus_by_flavor[gpu_flavor] += canonical(names.RESOURCE_GPU, usage)
    found: list[Excess] = []
    total = sum(admitted.values())
    if len(live) > total:
        found.append(Excess(PODS, _beyond(live, total), f"{len(live)} pods run, {total} admitted"))
    if pod_set_of is not None:
        by_set: dict[str, list[Obj]] = defaultdict(list)
        for pod in live:
            if (ps := pod_set_of(pod)) is not None:
                by_set[ps].append(pod)
        for ps, members in sorted(by_set.items()):
            if len(members) > admitted.get(ps, 0):
                found.append(
                    Excess(
                        POD_SET,
                        _beyond(members, admitted.get(ps, 0)),
                        f"pod set {ps}: {len(members)} pods run, {admitted.get(ps, 0)} admitted",
                    )
                )
    gpu_total = sum(gpus_by_flavor.values())
    if sum(gpus.values()) > gpu_total:
        found.append(
            Excess(
                GPUS,
                _over_gpus(live, gpus, gpu_total),
                f"the pods ask for {sum(gpus.values())} GPUs, {gpu_total} admitted",
            )
        )
    found += _placement(live, gpus, gpus_by_flavor, used_flavors, nodes, flavors)
    return found


def _placement(
    live: Sequence[Obj],
    gpus: Mapping[str, int],
    gpus_by_flavor: Mapping[str, int],
    used_flavors: set[str],
    nodes: Mapping[str, Obj],
    flavors: Mapping[str, Obj],
) -> list[Excess]:
    """Pods on nodes of none of their admitted flavors, and GPUs past a flavor's admitted
    share on the nodes only that flavor (of the admitted GPU flavors) describes."""
    if any(f not in flavors for f in used_flavors):
        return []  # a flavor the cache has not seen: nothing to judge by
    gpu_flavors = sorted(f for f, n in gpus_by_flavor.items() if n and f in flavors)
    elsewhere: list[str] = []
    only: dict[str, list[Obj]] = defaultdict(list)
    for pod in live:
        name = str(_meta(pod).get("name"))
        node = nodes.get(str((pod.get("spec") or {}).get("nodeName")))
        if node is None:
            continue
        candidates = gpu_flavors if gpus[name] else sorted(used_flavors)
        matching = [f for f in candidates if _matches(node, flavors[f])]
        if candidates and not matching:
            elsewhere.append(name)
        elif gpus[name] and len(matching) == 1:
            only[matching[0]].append(pod)
    found = []
    if elsewhere:
        found.append(
            Excess(
                FLAVOR,
                tuple(sorted(elsewhere)),
                "pods run on nodes of none of the admitted flavors "
                f"({', '.join(sorted(used_flavors))})",
            )
        )
    for flavor, members in sorted(only.items()):
        if len(gpu_flavors) < 2:
            break  # one GPU flavor: the total says it all
        used = sum(gpus[str(_meta(p).get("name"))] for p in members)
        if used > gpus_by_flavor[flavor]:
            found.append(
                Excess(
                    GPUS,
                    _over_gpus(members, gpus, gpus_by_flavor[flavor]),
                    f"flavor {flavor}: the pods on its nodes ask for {used} GPUs, "
                    f"{gpus_by_flavor[flavor]} admitted",
                )
            )
    return found


def describe(found: Sequence[Excess], limit: int = 10) -> str:
    """The excesses in words, naming at most `limit` pods."""
    named = sorted({p for e in found for p in e.pods})
    shown = ", ".join(named[:limit]) + (
        f" and {len(named) - limit} more" if len(named) > limit else ""
    )
    return f"{'; '.join(e.detail for e in found)} (pods: {shown or 'none named'})"
