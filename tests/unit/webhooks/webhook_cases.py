"""Builders of AdmissionReview requests and a small JSONPatch applier for the webhook tests."""

from __future__ import annotations

import copy
from typing import Any

from queuectl.api import names

NS = "team-a"
USER = "alice"
JOB_KIND = {"group": "batch", "version": "v1", "kind": "Job"}


def job(
    labels: dict[str, str] | None = None,
    suspend: bool | None = None,
    name: str = "train",
    annotations: dict[str, str] | None = None,
) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": NS}
    if labels is not None:
        meta["labels"] = dict(labels)
    if annotations is not None:
        meta["annotations"] = dict(annotations)
    spec: dict[str, Any] = {"template": {"spec": {"containers": [{"name": "c", "image": "x"}]}}}
    if suspend is not None:
        spec["suspend"] = suspend
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": meta, "spec": spec}


def request(
    obj: dict[str, Any] | None,
    old: dict[str, Any] | None = None,
    operation: str | None = None,
    kind: dict[str, str] = JOB_KIND,
    user: str = USER,
    namespace: str | None = NS,
) -> dict[str, Any]:
    meta = (obj or old or {}).get("metadata", {})
    req: dict[str, Any] = {
        "uid": "0df28fbd-5f5f-11e8-bc74-36e6bb280816",
        "kind": kind,
        "operation": operation or ("UPDATE" if old is not None else "CREATE"),
        "name": meta.get("name", ""),
        "userInfo": {"username": user, "groups": ["system:authenticated"]},
        "object": obj,
        "oldObject": old,
    }
    if namespace is not None:
        req["namespace"] = namespace
    return req


def apply_patch(doc: dict[str, Any], patch: list[dict[str, Any]]) -> dict[str, Any]:
    """Apply the JSONPatch subset the webhooks emit (add, remove, replace, test)."""
    out = copy.deepcopy(doc)
    for op in patch:
        *parents, last = [
            t.replace("~1", "/").replace("~0", "~") for t in op["path"].split("/")[1:]
        ]
        target = out
        for token in parents:
            target = target[token]
        if op["op"] in ("add", "replace"):
            target[last] = copy.deepcopy(op["value"])
        elif op["op"] == "remove":
            del target[last]
        elif op["op"] == "test":
            assert target[last] == op["value"]
        else:
            raise AssertionError(f"unexpected op {op}")
    return out


def gpu_pod_claiming(
    owner: dict[str, Any], labels: dict[str, str] | None = None, gpus: str = "8"
) -> dict[str, Any]:
    """A bare GPU pod naming `owner` (an ownerReference without `controller`) as its
    controller: what a user writes to run beside an admitted job."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "generateName": "claims-",
            "namespace": NS,
            "labels": dict(labels or {}),
            "ownerReferences": [{**owner, "controller": True}],
        },
        "spec": {
            "containers": [
                {"name": "c", "image": "x", "resources": {"limits": {names.GPU_RESOURCE: gpus}}}
            ]
        },
    }
