"""The types of the fields each route's decision reads, checked before any decision runs.

The API server decodes every object against its schema before it calls a webhook, so a Job
whose `parallelism` is "abc" or whose containers are a string reaches us only in a review sent
by hand. The decisions read such fields as the schema says they are (`int(parallelism)`,
`for c in containers`); rather than guard every read in every kind, the envelope layer checks,
per route, exactly the fields its decisions read and refuses a review that gets one wrong with
its path and the type it must have (HTTP 200, a denial with code 422: the sender sees why).
Absent fields pass (the decisions read them as their defaults); a null does not, where the API
server never sends one.

Job kinds are checked through their pod-set paths (`JOB_KINDS`: one entry per registered kind;
a test keeps it complete), pods and LeaderWorkerSets through their pod templates, our own
resources through what `resources` reads. docs/design/webhooks.md, "Hand-made reviews".
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Collection, Mapping
from typing import Any, Final

from queuectl.api import names
from queuectl.jobs.registry import Registry
from queuectl.webhooks.review import Request

Schema = Callable[[Any, str], str | None]
"""(value, its path) -> the first problem, None when the value has the type read."""


def _shown(value: Any) -> str:
    text = json.dumps(value) if value is None or isinstance(value, bool) else repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _leaf(what: str, ok: Callable[[Any], bool]) -> Schema:
    def check(value: Any, where: str) -> str | None:
        return None if ok(value) else f"{where} must be {what}, got {_shown(value)}"

    return check


def _is_count(value: Any) -> bool:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    return math.isfinite(value) and value == int(value) and 0 <= value <= 2**31 - 1


STRING: Final = _leaf("a string", lambda v: isinstance(v, str))
BOOLEAN: Final = _leaf("true or false", lambda v: isinstance(v, bool))
COUNT: Final = _leaf("a whole number from 0 to 2147483647", _is_count)
QUANTITY: Final = _leaf(
    "a quantity (a string such as '8' or '500m', or a number)",
    lambda v: (
        isinstance(v, str)
        or (isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v))
    ),
)
ANY_OBJECT: Final = _leaf("an object", lambda v: isinstance(v, dict))


def obj(fields: Mapping[str, Schema], required: Collection[str] = ()) -> Schema:
    """An object whose named fields, when present, have their types."""

    def check(value: Any, where: str) -> str | None:
        if not isinstance(value, dict):
            return f"{where} must be an object, got {_shown(value)}"
        for key in required:
            if value.get(key) is None:
                return f"{where}.{key} is missing; every object sent for review has one"
        for key, schema in fields.items():
            if key in value and (problem := schema(value[key], f"{where}.{key}")):
                return problem
        return None

    return check


def nullable(schema: Schema) -> Schema:
    """`schema`, or null: only in what queuectl writes itself (the API server drops a null
    field of a built-in kind, and prunes one of a custom resource unless its schema says
    nullable), so everywhere else a null is as wrong as a string for an object."""

    def check(value: Any, where: str) -> str | None:
        return None if value is None else schema(value, where)

    return check


def list_of(item: Schema) -> Schema:
    def check(value: Any, where: str) -> str | None:
        if not isinstance(value, list):
            return f"{where} must be a list, got {_shown(value)}"
        for i, found in enumerate(value):
            if problem := item(found, f"{where}[{i}]"):
                return problem
        return None

    return check


def map_of(item: Schema) -> Schema:
    def check(value: Any, where: str) -> str | None:
        if not isinstance(value, dict):
            return f"{where} must be an object (a map), got {_shown(value)}"
        for key, found in value.items():
            if problem := item(found, f"{where}[{key!r}]"):
                return problem
        return None

    return check


def json_text(schema: Schema) -> Schema:
    """A string holding JSON (an annotation queuectl writes): when it parses, what it holds
    is checked too (one that does not parse is read as absent)."""

    def check(value: Any, where: str) -> str | None:
        if not isinstance(value, str):
            return f"{where} must be a string, got {_shown(value)}"
        try:
            decoded = json.loads(value)
        except ValueError:
            return None
        return schema(decoded, f"{where} (decoded)") if isinstance(decoded, dict) else None

    return check


# --- pods and their templates ----------------------------------------------------------------
META: Final = obj({"name": STRING, "labels": map_of(STRING), "annotations": map_of(STRING)})
RESOURCES: Final = obj({"requests": map_of(QUANTITY), "limits": map_of(QUANTITY)})
CONTAINER: Final = obj(
    {"name": STRING, "image": STRING, "resources": RESOURCES, "restartPolicy": STRING}
)
_TERM: Final = obj({"matchExpressions": list_of(ANY_OBJECT)})
AFFINITY: Final = obj(
    {
        "nodeAffinity": obj(
            {
                "requiredDuringSchedulingIgnoredDuringExecution": obj(
                    {"nodeSelectorTerms": list_of(_TERM)}
                )
            }
        )
    }
)
POD_SPEC: Final = obj(
    {
        "containers": list_of(CONTAINER),
        "initContainers": list_of(CONTAINER),
        "overhead": map_of(QUANTITY),
        "priorityClassName": STRING,
        "schedulingGates": list_of(obj({"name": STRING})),
        "affinity": AFFINITY,
        "nodeSelector": map_of(STRING),
        "tolerations": list_of(ANY_OBJECT),
    }
)
POD_TEMPLATE: Final = obj({"metadata": META, "spec": POD_SPEC})
POD: Final = obj({"metadata": META, "spec": POD_SPEC}, required=("metadata",))

# --- job kinds, through their pod-set paths --------------------------------------------------
_JOB_SPEC: Final = {
    "suspend": BOOLEAN,
    "parallelism": COUNT,
    "completions": COUNT,
    "template": POD_TEMPLATE,
}
_RAY_GROUP: Final = {
    "groupName": STRING,
    "replicas": COUNT,
    "minReplicas": COUNT,
    "maxReplicas": COUNT,
    "numOfHosts": COUNT,
    "suspend": BOOLEAN,
    "template": POD_TEMPLATE,
}
_RAY_CLUSTER: Final = obj(
    {
        "suspend": BOOLEAN,
        "enableInTreeAutoscaling": BOOLEAN,
        "headGroupSpec": obj({"template": POD_TEMPLATE}),
        "workerGroupSpecs": list_of(obj(_RAY_GROUP)),
    }
)
_TRAINJOB_SNAPSHOT: Final = obj(
    {
        "kind": nullable(STRING),
        "name": nullable(STRING),
        "mlPolicy": nullable(
            obj({"numNodes": nullable(COUNT), "mpi": nullable(obj({"runLauncherAsNode": BOOLEAN}))})
        ),
        "replicatedJobs": list_of(
            obj(
                {
                    "name": nullable(STRING),
                    "replicas": nullable(COUNT),
                    "parallelism": nullable(COUNT),
                    "ancestor": nullable(STRING),
                    "template": nullable(POD_TEMPLATE),
                }
            )
        ),
    }
)
"""What `trainjob.runtime.snapshot` records (a null where the runtime leaves a field out)."""
_OVERRIDE: Final = obj(
    {
        "metadata": obj({"labels": map_of(STRING), "annotations": map_of(STRING)}),
        "targetJobs": list_of(obj({"name": STRING})),
        "spec": POD_SPEC,
    }
)


_META_FIELDS: Final = {"name": STRING, "labels": map_of(STRING)}


def _job(spec: Mapping[str, Schema], annotations: Mapping[str, Schema] | None = None) -> Schema:
    meta = META if annotations is None else obj({**_META_FIELDS, "annotations": obj(annotations)})
    return obj({"metadata": meta, "spec": obj(spec)}, required=("metadata",))


JOB_KINDS: Final[Mapping[str, Schema]] = {
    "Job": _job(_JOB_SPEC),
    "JobSet": _job(
        {
            "suspend": BOOLEAN,
            "replicatedJobs": list_of(
                obj(
                    {
                        "name": STRING,
                        "replicas": COUNT,
                        "template": obj({"metadata": META, "spec": obj(_JOB_SPEC)}),
                    }
                )
            ),
        }
    ),
    "PyTorchJob": _job(
        {
            "runPolicy": obj({"suspend": BOOLEAN}),
            "pytorchReplicaSpecs": map_of(obj({"replicas": COUNT, "template": POD_TEMPLATE})),
        }
    ),
    "MPIJob": _job(
        {
            "runPolicy": obj({"suspend": BOOLEAN, "managedBy": STRING}),
            "mpiReplicaSpecs": map_of(obj({"replicas": COUNT, "template": POD_TEMPLATE})),
        }
    ),
    "RayCluster": obj({"metadata": META, "spec": _RAY_CLUSTER}, required=("metadata",)),
    "RayJob": _job(
        {
            "suspend": BOOLEAN,
            "submissionMode": STRING,
            "rayClusterSpec": _RAY_CLUSTER,
            "submitterPodTemplate": POD_TEMPLATE,
        }
    ),
    "TrainJob": _job(
        {
            "suspend": BOOLEAN,
            "labels": map_of(STRING),
            "runtimeRef": obj({"name": STRING, "kind": STRING, "apiGroup": STRING}),
            "trainer": obj({"numNodes": COUNT, "resourcesPerNode": RESOURCES}),
            "podTemplateOverrides": list_of(_OVERRIDE),
        },
        annotations={names.ANNOTATION_TRAINJOB_RUNTIME: json_text(_TRAINJOB_SNAPSHOT)},
    ),
}
"""Registered kind name -> what its decisions read (its pod sets, counts, suspend field).
A kind from outside the tree (`--job-kind`) gets `ANY_KIND`."""
ANY_KIND: Final = obj({"metadata": META}, required=("metadata",))

# --- our own resources -----------------------------------------------------------------------
_QUOTA: Final = obj(
    {"name": STRING, "nominalQuota": QUANTITY, "borrowingLimit": QUANTITY, "lendingLimit": QUANTITY}
)
_RESOURCE_GROUPS: Final = list_of(
    obj(
        {
            "coveredResources": list_of(STRING),
            "flavors": list_of(obj({"name": STRING, "resources": list_of(_QUOTA)})),
        }
    )
)
QUEUECTL_KINDS: Final[Mapping[str, Schema]] = {
    "ClusterQueue": obj({"spec": obj({"cohortName": STRING, "resourceGroups": _RESOURCE_GROUPS})}),
    "Cohort": obj({"spec": obj({"parentName": STRING, "resourceGroups": _RESOURCE_GROUPS})}),
    "LocalQueue": obj({"spec": obj({"clusterQueue": STRING})}),
}
LWS: Final = obj(
    {
        "spec": obj(
            {
                "leaderWorkerTemplate": obj(
                    {"leaderTemplate": POD_TEMPLATE, "workerTemplate": POD_TEMPLATE, "size": COUNT}
                )
            }
        )
    }
)
SCALE: Final = obj(
    {"metadata": obj({"name": STRING, "namespace": STRING}), "spec": obj({"replicas": COUNT})},
    required=("metadata",),
)
"""An autoscaling/v1 Scale: what the scale route compares (its name and spec.replicas)."""


# --- routes ----------------------------------------------------------------------------------
def _job_schema(kind: Mapping[str, Any], kinds: Registry) -> Schema | None:
    found = kinds.for_group_kind(str(kind.get("group") or ""), str(kind.get("kind") or ""))
    if found is None:
        return None  # not a kind we queue: the decisions pass it through unread
    return JOB_KINDS.get(found.resource.kind, ANY_KIND)


def _pod_schema(kind: Mapping[str, Any], _: Registry) -> Schema | None:
    return POD if not kind.get("group") and kind.get("kind") == "Pod" else None


def _scale_schema(kind: Mapping[str, Any], _: Registry) -> Schema | None:
    return SCALE if (kind.get("group"), kind.get("kind")) == ("autoscaling", "Scale") else None


def _queuectl_schema(kind: Mapping[str, Any], _: Registry) -> Schema | None:
    return QUEUECTL_KINDS.get(str(kind.get("kind"))) if kind.get("group") == names.GROUP else None


ROUTES: Final[Mapping[str, Callable[[Mapping[str, Any], Registry], Schema | None]]] = {
    names.WEBHOOK_PATH_MUTATE_JOB: _job_schema,
    names.WEBHOOK_PATH_MUTATE_UNLABELLED_JOB: _job_schema,
    names.WEBHOOK_PATH_VALIDATE_JOB: _job_schema,
    names.WEBHOOK_PATH_VALIDATE_OWNED_JOB: _job_schema,
    names.WEBHOOK_PATH_MUTATE_POD: _pod_schema,
    names.WEBHOOK_PATH_MUTATE_PINNED_POD: _pod_schema,
    names.WEBHOOK_PATH_VALIDATE_POD: _pod_schema,
    names.WEBHOOK_PATH_MUTATE_LWS: lambda kind, kinds: LWS,
    names.WEBHOOK_PATH_VALIDATE_QUEUECTL: _queuectl_schema,
    names.WEBHOOK_PATH_VALIDATE_SCALE: _scale_schema,
}
"""Route -> the schema of the object its decisions read. The Workload route is not here: its
decision reads every field through type checks of its own (`workloads._part`)."""


def problem(route: str, request: Request, kinds: Registry) -> str | None:
    """Why a checked request cannot be decided on this route (its object or oldObject has a
    field of the wrong type), or None. The message names the field and the type it needs."""
    choose = ROUTES.get(route)
    schema = choose(request.get("kind") or {}, kinds) if choose is not None else None
    if schema is None:
        return None
    for field in ("object", "oldObject"):
        value = request.get(field)
        if value is not None and (found := schema(value, f"request.{field}")):
            return (
                f"{found}. The API server checks every object against its schema before it "
                "calls a webhook, so this review was not sent by it; send the object as the "
                "API server would"
            )
    return None
