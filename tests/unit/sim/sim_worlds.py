"""Tiny configurations for the simulator's tests, written as the manifests a user applies."""

from __future__ import annotations

from typing import Any

from queuectl.sim import Job, SimConfig, load_config

G = "queuectl.io/v1beta1"


def queue(
    name: str,
    nominal: int,
    *,
    cohort: str | None = None,
    borrow: int | None = None,
    lend: int | None = None,
) -> dict[str, Any]:
    gpu: dict[str, Any] = {"name": "nvidia.com/gpu", "nominalQuota": nominal}
    if borrow is not None:
        gpu["borrowingLimit"] = borrow
    if lend is not None:
        gpu["lendingLimit"] = lend
    spec: dict[str, Any] = {
        "preemption": {"withinClusterQueue": "LowerPriority", "reclaimWithinCohort": "Any"},
        "resourceGroups": [
            {
                "coveredResources": ["nvidia.com/gpu"],
                "flavors": [{"name": "gpu", "resources": [gpu]}],
            }
        ],
    }
    if cohort:
        spec["cohortName"] = cohort
    return {"apiVersion": G, "kind": "ClusterQueue", "metadata": {"name": name}, "spec": spec}


def world(*queues: dict[str, Any]) -> SimConfig:
    """One flavor `gpu`, the given queues (a LocalQueue `q` in namespace = queue name), and
    classes low (no protection), grace (300 s notice), protected (600 s minimum), high."""
    docs: list[dict[str, Any]] = [
        {"apiVersion": G, "kind": "ResourceFlavor", "metadata": {"name": "gpu"}},
        {"apiVersion": G, "kind": "WorkloadPriorityClass", "metadata": {"name": "low"}, "value": 1},
        {
            "apiVersion": G,
            "kind": "WorkloadPriorityClass",
            "metadata": {"name": "grace"},
            "value": 1,
            "preemptionGracePeriodSeconds": 300,
        },
        {
            "apiVersion": G,
            "kind": "WorkloadPriorityClass",
            "metadata": {"name": "protected"},
            "value": 1,
            "minimumRuntimeSeconds": 600,
        },
        {
            "apiVersion": G,
            "kind": "WorkloadPriorityClass",
            "metadata": {"name": "high"},
            "value": 100,
        },
    ]
    for q in queues:
        name = q["metadata"]["name"]
        docs.append(q)
        docs.append(
            {
                "apiVersion": G,
                "kind": "LocalQueue",
                "metadata": {"name": "q", "namespace": name},
                "spec": {"clusterQueue": name},
            }
        )
    return load_config((f"doc {i}", d) for i, d in enumerate(docs))


def job(
    name: str,
    submit: float,
    gpus: int,
    runtime: float,
    *,
    team: str = "a",
    pc: str = "low",
    checkpoint: float = 0.0,
    max_exec: float | None = None,
    pods: int = 1,
) -> Job:
    return Job(
        name=name,
        submit=submit,
        namespace=team,
        queue="q",
        pods=pods,
        gpus=gpus,
        runtime=runtime,
        priority_class=pc,
        checkpoint=checkpoint,
        max_exec=max_exec,
    )
