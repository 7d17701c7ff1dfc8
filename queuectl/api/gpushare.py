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
    """The device that stands in for nvidia.com/gpu in this template, if any."""
    annotations = (template.get("metadata") or {}).get("annotations") or {}
    value = annotations.get(names.ANNOTATION_GPU_RESOURCE)
    return str(value) if value else None


def original(template: Mapping[str, Any]) -> dict[str, Any]:
    """The template as the user wrote it: the stand-in device named nvidia.com/gpu again and
    the annotation gone (a copy; the template itself when nothing was renamed)."""
    device = served_by(template)
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
