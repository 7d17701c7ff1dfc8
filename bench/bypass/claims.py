"""Mutations that are not a field of the object: other objects claiming it as their owner, its
scale subresource, a pod's in-place resize, and new objects of the kind charged from fields a
user writes."""

from __future__ import annotations

import copy
from typing import Any

from bench.bypass.mutations import EXTRA_GPUS, Mutation, Obj, hostile_value, our_keys, set_op
from queuectl.api import names


def owner_mutations(role: str, kind_of_role: str) -> list[Mutation]:
    """Objects that claim the one in `role` as their controller: a bare GPU pod (with and
    without a queue label, with the owner's uid and with a wrong one) and a GPU Job."""
    pod: Obj = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"generateName": "bypass-claims-", "ownerReferences": ["$OWNER"]},
        "spec": {
            "terminationGracePeriodSeconds": 0,
            "containers": [
                {
                    "name": "main",
                    "image": "registry.k8s.io/pause:3.10",
                    "resources": {
                        "requests": {names.GPU_RESOURCE: EXTRA_GPUS},
                        "limits": {names.GPU_RESOURCE: EXTRA_GPUS},
                    },
                }
            ],
        },
    }
    queued = copy.deepcopy(pod)
    queued["metadata"]["labels"] = {names.LABEL_QUEUE_NAME: "lq"}
    job: Obj = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"generateName": "bypass-claims-", "ownerReferences": ["$OWNER"]},
        "spec": {
            "backoffLimit": 0,
            "template": {"spec": {**copy.deepcopy(pod["spec"]), "restartPolicy": "Never"}},
        },
    }
    foreign = copy.deepcopy(queued)
    foreign["metadata"]["ownerReferences"] = [
        {
            "apiVersion": "apps/v1",
            "kind": "ReplicaSet",
            "name": "bypass-rs",
            "uid": "00000000-0000-0000-0000-000000000001",
            "controller": True,
        }
    ]
    out = [
        Mutation(
            "owner", role, f"a bare GPU pod claiming the {kind_of_role} as controller", create=pod
        ),
        Mutation(
            "owner",
            role,
            f"a queued GPU pod claiming the {kind_of_role} as controller",
            create=queued,
        ),
        Mutation(
            "owner",
            role,
            f"a GPU pod claiming the {kind_of_role} with a wrong uid",
            create=pod,
            meta={"wrong_uid": True},
        ),
        Mutation("owner", role, f"a GPU Job claiming the {kind_of_role} as controller", create=job),
    ]
    if role == "object":
        out.append(
            Mutation("owner", role, "a queue-labelled GPU pod of a ReplicaSet", create=foreign)
        )
        out.append(
            Mutation(
                "owner",
                "queued",
                "the queued object claims the admitted one as controller",
                (
                    {
                        "op": "add",
                        "path": "/metadata/ownerReferences",
                        "value": ["$OWNER_OF_OBJECT"],
                    },
                ),
            )
        )
    return out


def scale_mutation(role: str, replicas: int) -> Mutation:
    return Mutation(
        "scale",
        role,
        f"scale subresource: replicas {replicas} -> {replicas + 2}",
        subresource="scale",
        meta={"replicas": replicas + 2},
    )


def resize_mutations(role: str, pod: Obj) -> list[Mutation]:
    """In-place resize (pods/resize) of the first container's GPUs and CPU."""
    out = []
    for res, big in ((names.GPU_RESOURCE, EXTRA_GPUS), ("cpu", "32")):
        ops = []
        resources = pod["spec"]["containers"][0].get("resources") or {}
        for part in ("requests", "limits"):
            held = resources.get(part)
            if isinstance(held, dict):
                ops.append(
                    set_op(("spec", "containers", 0, "resources", part, res), big, res in held)
                )
        if ops:
            out.append(
                Mutation(
                    "resize", role, f"pods/resize: {res} -> {big}", tuple(ops), subresource="resize"
                )
            )
    return out


PROBE_QUEUE = "lq-probe"  # an empty 8-GPU queue: what a new object is charged decides if it runs
PROBE_PODS = 4  # 4 x 4 GPUs: twice that queue, so it may only run if charged too little
ALIAS = "rdma/hca"  # an extended resource the fuzzer's H100 nodes also offer


def charge_mutations() -> list[Mutation]:
    """New objects of the kind, twice the size of an empty queue, each with one thing a user
    can write that might shrink what it is charged: one of our annotations or labels on every
    pod template (a value that would help), or a GPU resource alias with a request for it."""
    out = [
        Mutation(
            "charge",
            "object",
            f"new, 16 GPUs, pod templates name {ALIAS} as the GPU resource and request 1",
            meta={"variant": "alias"},
        )
    ]
    for key, sort in our_keys().items():
        if sort != "gate":
            out.append(
                Mutation(
                    "charge",
                    "object",
                    f"new, 16 GPUs, pod templates' {sort} {key}={hostile_value(key)}",
                    meta={"variant": sort, "key": key, "value": hostile_value(key)},
                )
            )
    return out


def _pod_template_metas(node: Any) -> list[Obj]:
    """Every metadata dict beside a pod spec (a pod's own, a template's), made if missing."""
    found: list[Obj] = []
    if isinstance(node, dict):
        spec = node.get("spec")
        if isinstance(spec, dict) and isinstance(spec.get("containers"), list):
            found.append(node.setdefault("metadata", {}))
        for v in node.values():
            found += _pod_template_metas(v)
    elif isinstance(node, list):
        for v in node:
            found += _pod_template_metas(v)
    return found


def _gpu_containers(node: Any) -> list[Obj]:
    found: list[Obj] = []
    if isinstance(node, dict):
        limits = (node.get("resources") or {}).get("limits") or {}
        if "image" in node and names.GPU_RESOURCE in limits:
            found.append(node)
        for v in node.values():
            found += _gpu_containers(v)
    elif isinstance(node, list):
        for v in node:
            found += _gpu_containers(v)
    return found


def charged_objects(objs: list[Obj], m: Mutation) -> list[Obj]:
    """The kind's new objects with the variant `m` names applied."""
    objs = copy.deepcopy(objs)
    variant = m.meta["variant"]
    for obj in objs:
        metas = _pod_template_metas(obj) or [obj["metadata"]]
        for meta in metas:
            if variant == "alias":
                meta.setdefault("annotations", {})[names.ANNOTATION_GPU_RESOURCE] = ALIAS
            else:
                where = "labels" if variant == "label" else "annotations"
                meta.setdefault(where, {})[m.meta["key"]] = m.meta["value"]
        if variant == "alias":
            for c in _gpu_containers(obj):
                for part in ("requests", "limits"):
                    c["resources"].setdefault(part, {})[ALIAS] = "1"
            per_node = (obj.get("spec") or {}).get("trainer", {}).get("resourcesPerNode")
            if isinstance(per_node, dict):  # a TrainJob: no pod template of its own
                for part in ("requests", "limits"):
                    per_node.setdefault(part, {})[ALIAS] = "1"
    return objs
