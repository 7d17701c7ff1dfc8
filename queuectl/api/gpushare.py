"""One requested GPU served by another device: renaming `nvidia.com/gpu` in a pod template.

A flavor with `gpuResource` (a MIG slice, a renamed shared GPU) serves `nvidia.com/gpu`; when a
pod set is admitted there, its containers ask for that device instead, and the template carries
`gpu.queuectl.io/gpu-resource` naming it. `original` undoes both, so the webhook and the drift
check read the shape the user wrote. Pure; shared by the controller and the webhooks.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from queuectl.api import names

# A flavor's gpuResource names an NVIDIA device (api/flavor.py, GPU_RESOURCE_IS_NVIDIA).
_NVIDIA = "nvidia.com/"


def _rename(resources: Mapping[str, Any], old: str, new: str) -> dict[str, Any]:
    return {(new if k == old else k): v for k, v in resources.items()}


def rename_containers(pod_spec: Mapping[str, Any], old: str, new: str) -> list[dict[str, Any]]:
    """The pod spec's containers with resource `old` renamed to `new` in requests and limits."""
    out = []
    for container in pod_spec.get("containers") or ():
        c = copy.deepcopy(dict(container))
        res = c.get("resources") or {}
        for part in ("requests", "limits"):
            if res.get(part):
                res[part] = _rename(res[part], old, new)
        out.append(c)
    return out


def served_by(template: Mapping[str, Any]) -> str | None:
    """The device the template's annotation names as standing in for nvidia.com/gpu, if any
    (what `restore` undoes; `stand_in` says whether queuectl did the rename)."""
    annotations = (template.get("metadata") or {}).get("annotations") or {}
    value = annotations.get(names.ANNOTATION_GPU_RESOURCE)
    return str(value) if value else None


def _asks_for(pod_spec: Mapping[str, Any], resource: str) -> bool:
    for container in pod_spec.get("containers") or ():
        res = container.get("resources") or {}
        if any(resource in (res.get(part) or {}) for part in ("requests", "limits")):
            return True
    return False


def stand_in(template: Mapping[str, Any]) -> str | None:
    """The device queuectl put in place of nvidia.com/gpu in this template, None when it did
    not. The annotation alone is not proof: queuectl renames only to an NVIDIA device other
    than nvidia.com/gpu (what a flavor's gpuResource may name), and renames every container,
    so a container still asking for nvidia.com/gpu means the rename was not queuectl's.
    Renaming such a template back would merge two resources into one key, the last written
    winning (8 GPUs and 1 RDMA device would read as 1 GPU): it is read as written instead."""
    device = served_by(template)
    if device is None or not device.startswith(_NVIDIA) or device == names.RESOURCE_GPU:
        return None
    if _asks_for(template.get("spec") or {}, names.RESOURCE_GPU):
        return None
    return device


def original(template: Mapping[str, Any]) -> dict[str, Any]:
    """The template as the user wrote it: the stand-in device named nvidia.com/gpu again and
    the annotation gone (a copy; the template itself when queuectl renamed nothing, `stand_in`)."""
    device = stand_in(template)
    if device is None:
        return dict(template)
    out = copy.deepcopy(dict(template))
    annotations = out["metadata"]["annotations"]
    del annotations[names.ANNOTATION_GPU_RESOURCE]
    if not annotations:
        del out["metadata"]["annotations"]
    spec = out.get("spec") or {}
    if spec.get("containers"):
        spec["containers"] = rename_containers(spec, device, names.RESOURCE_GPU)
    return out


# --- MIG layouts (for made-up nodes: the scripted agent reader and `dev up`) ----------------
COMPUTE_SLICES = 7
MEMORY_SLICES = 8


def parse_profile(profile: str, gpu_memory_gb: int) -> tuple[int, int]:
    """`3g.40gb` -> (GPU instance slices 3, memory slices 4) on a GPU of `gpu_memory_gb`."""
    try:
        gi, mem = profile.split(".")
        slices, gb = int(gi.removesuffix("g")), int(mem.removesuffix("gb"))
    except ValueError:
        raise ValueError(
            f"MIG profile {profile!r} is not <N>g.<M>gb (such as 1g.10gb or 3g.40gb)"
        ) from None
    size = max(1, round(gb * MEMORY_SLICES / gpu_memory_gb))
    if not 1 <= slices <= COMPUTE_SLICES or size > MEMORY_SLICES:
        raise ValueError(f"MIG profile {profile!r} does not fit a {gpu_memory_gb} GB GPU")
    return slices, size


def parse_layout(spec: str, gpu_memory_gb: int) -> list[str]:
    """One GPU's MIG devices from a mig-parted style name: `all-1g.10gb` (as many as fit),
    `all-balanced`, or profiles joined by `+` (`3g.40gb+2g.20gb+1g.10gb`)."""
    if spec == "all-balanced":
        small = round(gpu_memory_gb / MEMORY_SLICES)
        return [f"1g.{small}gb"] * 2 + [f"2g.{small * 2}gb", f"3g.{small * 4}gb"]
    if spec.startswith("all-"):
        profile = spec.removeprefix("all-")
        slices, size = parse_profile(profile, gpu_memory_gb)
        return [profile] * min(COMPUTE_SLICES // slices, MEMORY_SLICES // size)
    profiles = [p for p in spec.split("+") if p]
    used = [parse_profile(p, gpu_memory_gb) for p in profiles]
    if (
        not profiles
        or sum(g for g, _ in used) > COMPUTE_SLICES
        or sum(s for _, s in used) > MEMORY_SLICES
    ):
        raise ValueError(
            f"MIG layout {spec!r} does not fit one GPU: use all-<profile>, all-balanced or "
            f"profiles joined by '+' within {COMPUTE_SLICES} compute and "
            f"{MEMORY_SLICES} memory slices"
        )
    return profiles
