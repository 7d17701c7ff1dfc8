"""In-memory API objects (as the API server returns them) for the CLI's unit tests."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from queuectl.api import names

Obj = dict[str, Any]
NOW = 1_800_000_000.0
GPU = names.GPU_RESOURCE


def ts(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def namespace(name: str) -> Obj:
    return {"metadata": {"name": name, "labels": {"kubernetes.io/metadata.name": name}}}


def flavor(name: str, product: str) -> Obj:
    return {"metadata": {"name": name}, "spec": {"nodeLabels": {names.LABEL_GPU_PRODUCT: product}}}


def node(name: str, product: str, gpus: int = 8, **labels: str) -> Obj:
    return {
        "metadata": {"name": name, "labels": {names.LABEL_GPU_PRODUCT: product, **labels}},
        "spec": {},
        "status": {
            "allocatable": {GPU: str(gpus), "cpu": "128", "memory": "2Ti", "pods": "110"},
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }


def cohort(name: str, parent: str | None = None) -> Obj:
    spec: Obj = {"parentName": parent} if parent else {}
    return {"metadata": {"name": name}, "spec": spec}


def gpu_quota(flavor_name: str, nominal: int, **limits: int) -> Obj:
    res: Obj = {"name": GPU, "nominalQuota": nominal}
    if "borrowing" in limits:
        res["borrowingLimit"] = limits["borrowing"]
    if "lending" in limits:
        res["lendingLimit"] = limits["lending"]
    return {"name": flavor_name, "resources": [res]}


def cluster_queue(name: str, cohort_name: str | None, *flavors: Obj, **spec: Any) -> Obj:
    body: Obj = {
        "namespaceSelector": {},
        "resourceGroups": [{"coveredResources": [GPU], "flavors": list(flavors)}],
        **spec,
    }
    if cohort_name:
        body["cohortName"] = cohort_name
    return {"metadata": {"name": name}, "spec": body}


def local_queue(ns: str, name: str, cq: str, stop: str | None = None) -> Obj:
    spec: Obj = {"clusterQueue": cq}
    if stop:
        spec["stopPolicy"] = stop
    return {"metadata": {"namespace": ns, "name": name}, "spec": spec}


def workload(
    ns: str,
    name: str,
    queue: str,
    gpus: int,
    *,
    count: int = 1,
    priority: int = 0,
    created: float = NOW - 600,
    admitted_to: str | None = None,
    flavor_name: str = "h100",
    admitted_at: float = NOW - 300,
    active: bool = True,
) -> Obj:
    obj: Obj = {
        "metadata": {"namespace": ns, "name": name, "creationTimestamp": ts(created)},
        "spec": {
            "queueName": queue,
            "priority": priority,
            "active": active,
            "podSets": [
                {
                    "name": "main",
                    "count": count,
                    "template": {
                        "spec": {
                            "containers": [{"name": "c", "resources": {"limits": {GPU: gpus}}}]
                        }
                    },
                }
            ],
        },
    }
    if admitted_to:
        obj["status"] = {
            "admission": {
                "clusterQueue": admitted_to,
                "podSetAssignments": [
                    {
                        "name": "main",
                        "count": count,
                        "flavors": {GPU: flavor_name},
                        "resourceUsage": {GPU: gpus * count},
                    }
                ],
            },
            "conditions": [
                {
                    "type": names.COND_QUOTA_RESERVED,
                    "status": "True",
                    "reason": "QuotaReserved",
                    "message": "",
                    "lastTransitionTime": ts(admitted_at),
                },
                {
                    "type": names.COND_ADMITTED,
                    "status": "True",
                    "reason": "Admitted",
                    "message": "",
                    "lastTransitionTime": ts(admitted_at),
                },
            ],
        }
    return obj


def research_tree() -> dict[str, list[Obj]]:
    """Cohort `research` with two teams: `vision` (16 H100, lends all) and `llm` (8 H100).
    4 nodes of 8 H100. `llm` borrows 8 of vision's GPUs; vision runs 8 of its own."""
    return {
        "namespaces": [namespace("team-vision"), namespace("team-llm")],
        "resourceflavors": [flavor("h100", "H100")],
        "cohorts": [cohort("research")],
        "clusterqueues": [
            cluster_queue("vision", "research", gpu_quota("h100", 16)),
            cluster_queue("llm", "research", gpu_quota("h100", 8)),
        ],
        "localqueues": [
            local_queue("team-vision", "default", "vision"),
            local_queue("team-llm", "training", "llm"),
        ],
        "nodes": [node(f"n{i}", "H100") for i in range(4)],
        "workloads": [
            workload("team-vision", "v-run", "default", 8, admitted_to="vision"),
            workload("team-llm", "l-run", "training", 8, count=2, admitted_to="llm"),
        ],
    }
