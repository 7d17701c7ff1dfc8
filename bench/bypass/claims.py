"""Mutations that are not a field of the object: other objects claiming it as their owner, its
scale subresource, and a pod's in-place resize."""

from __future__ import annotations

import copy

from bench.bypass.mutations import EXTRA_GPUS, Mutation, Obj, set_op
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
