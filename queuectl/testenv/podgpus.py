"""What pods hold and what Workloads admitted, read from the objects as the API returns them.

Pure helpers of the invariants (queuectl.testenv.invariants), and `namespace_gpus`: every GPU
pod of a namespace held to what its Workloads were admitted there, per flavor, whichever kind
made the pod (the bypass fuzzer's check, bench/bypass).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from queuectl.api import names
from queuectl.api.quantity import canonical

Obj = dict[str, Any]


@dataclass(frozen=True)
class Violation:
    kind: str
    subject: str
    detail: str


def spec_of(obj: Obj) -> Obj:
    return obj.get("spec") or {}


def status_of(obj: Obj) -> Obj:
    return obj.get("status") or {}


def is_true(obj: Obj, type_: str) -> bool:
    return any(
        c.get("type") == type_ and c.get("status") == "True"
        for c in status_of(obj).get("conditions") or []
    )


def key_of(obj: Obj) -> str:
    meta = obj["metadata"]
    return f"{meta.get('namespace', '')}/{meta['name']}".lstrip("/")


def admission_usage(wl: Obj) -> Counter[tuple[str, str]]:
    used: Counter[tuple[str, str]] = Counter()
    for psa in (status_of(wl).get("admission") or {}).get("podSetAssignments") or []:
        flavors = psa.get("flavors") or {}
        for res, qty in (psa.get("resourceUsage") or {}).items():
            used[(str(flavors.get(res, "")), res)] += canonical(res, qty)
    return used


def admitted_pods_of(wl: Obj) -> int:
    admission = status_of(wl).get("admission") or {}
    return sum(int(psa.get("count") or 0) for psa in admission.get("podSetAssignments") or [])


def holds_quota(wl: Obj) -> bool:
    return bool(status_of(wl).get("admission")) and not is_true(wl, names.COND_FINISHED)


def active(pod: Obj) -> bool:
    """A pod that holds its node's resources: bound, not terminal, not being deleted."""
    return (
        bool(spec_of(pod).get("nodeName"))
        and status_of(pod).get("phase") not in ("Succeeded", "Failed")
        and not pod["metadata"].get("deletionTimestamp")
    )


def container_gpus(c: Obj) -> int:
    resources = c.get("resources") or {}
    requests = resources.get("requests") or {}
    limits = resources.get("limits") or {}
    qty = requests.get(names.GPU_RESOURCE, limits.get(names.GPU_RESOURCE, 0))
    return canonical(names.GPU_RESOURCE, qty)


def pod_gpus(pod: Obj) -> int:
    """What the pod holds on its node, as the scheduler counts it: its containers' GPUs plus
    its sidecars' (init containers with restartPolicy Always run beside them), or an init
    container's (with the sidecars started before it), whichever is more."""
    spec = spec_of(pod)
    sidecars = 0
    peak = 0
    for c in spec.get("initContainers") or []:
        if c.get("restartPolicy") == "Always":
            sidecars += container_gpus(c)
        else:
            peak = max(peak, sidecars + container_gpus(c))
    running = sidecars + sum(container_gpus(c) for c in spec.get("containers") or [])
    return max(running, peak)


def _flavors_of(node: Obj, flavors: Sequence[Obj]) -> set[str]:
    labels = node["metadata"].get("labels") or {}
    return {
        fl["metadata"]["name"]
        for fl in flavors
        if all(labels.get(k) == v for k, v in (spec_of(fl).get("nodeLabels") or {}).items())
    }


def namespace_gpus(
    namespace: str,
    workloads: Sequence[Obj],
    pods: Sequence[Obj],
    *,
    nodes: Sequence[Obj],
    flavors: Sequence[Obj],
) -> list[Violation]:
    """The GPUs `namespace`'s active pods hold, per flavor, against its admitted Workloads.

    Read from the pods alone (not from which Job or label claims them): a child's pods, a pod
    relabelled or claimed by a forged owner all count. Each GPU pod is charged to a flavor
    admitted in the namespace whose nodeLabels its node matches (fewest choices first, then the
    flavor with most room left); a pod no admitted flavor's nodes hold is off-flavor.
    """
    admitted: Counter[str] = Counter()
    admitted_pods = 0
    for wl in workloads:
        if wl["metadata"].get("namespace") != namespace or not holds_quota(wl):
            continue
        for (flavor, res), qty in admission_usage(wl).items():
            if res == names.GPU_RESOURCE:
                admitted[flavor] += qty
        for psa in (status_of(wl).get("admission") or {}).get("podSetAssignments") or []:
            if names.GPU_RESOURCE in (psa.get("resourceUsage") or {}):
                admitted_pods += int(psa.get("count") or 0)
    by_name = {n["metadata"]["name"]: n for n in nodes}
    gpu_pods = [
        p
        for p in pods
        if p["metadata"].get("namespace") == namespace and active(p) and pod_gpus(p) > 0
    ]
    found: list[Violation] = []
    choices: list[tuple[Obj, list[str]]] = []
    for pod in gpu_pods:
        node = by_name.get(str(spec_of(pod)["nodeName"]))
        fits = _flavors_of(node, flavors) & set(admitted) if node is not None else set()
        if not fits:
            where = spec_of(pod)["nodeName"]
            found.append(
                Violation(
                    "gpus-off-flavor",
                    key_of(pod),
                    f"{pod_gpus(pod)} GPUs on node {where}, no admitted flavor "
                    f"({', '.join(sorted(admitted)) or 'none'}) matches it",
                )
            )
            continue
        choices.append((pod, sorted(fits)))
    left = Counter(admitted)
    over: Counter[str] = Counter()
    for pod, options in sorted(choices, key=lambda pc: (len(pc[1]), key_of(pc[0]))):
        flavor = max(options, key=lambda f: (left[f], f))
        left[flavor] -= pod_gpus(pod)
        if left[flavor] < 0:
            over[flavor] = -left[flavor]
    for flavor, excess in sorted(over.items()):
        found.append(
            Violation(
                "gpus-over-admission",
                f"{namespace}/{flavor}",
                f"{admitted[flavor] + excess} GPUs active on {flavor}, {admitted[flavor]} admitted",
            )
        )
    if len(gpu_pods) > admitted_pods:
        found.append(
            Violation(
                "gpu-pods-over-admission",
                namespace,
                f"{len(gpu_pods)} GPU pods active, {admitted_pods} admitted",
            )
        )
    return found
