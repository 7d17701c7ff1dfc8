"""Helpers the job-kind unit tests share: read a template's required node affinity, and apply
a merge patch as the API server does to a custom resource."""

from __future__ import annotations

import copy
from typing import Any

AFFINITY = "requiredDuringSchedulingIgnoredDuringExecution"


def required(pod_spec: dict[str, Any]) -> Any:
    """The required node affinity (a merge patch leaves an empty nodeAffinity behind)."""
    return ((pod_spec.get("affinity") or {}).get("nodeAffinity") or {}).get(AFFINITY)


def apply_merge(obj: Any, patch: Any) -> Any:
    """RFC 7386 merge patch, as the API server applies it to a custom resource."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out = dict(obj) if isinstance(obj, dict) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = apply_merge(out.get(key), value)
    return out
