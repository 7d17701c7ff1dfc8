"""The enforcement loop's shell: from pod events to an eviction (a job kind) or deleted pods (a
plain pod group), with a Warning Event naming the pods. A pod that claims an admitted Job is
caught on its first event, even when the Job controller releases it a moment later."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from queuectl.api import names
from queuectl.controller import kube as k
from queuectl.controller.cache import Cache
from queuectl.controller.enforce_loop import Enforcer

GPU = names.GPU_RESOURCE


class Recorder:
    """Stands in for the reconciler, the event recorder and the API client."""

    def __init__(self) -> None:
        self.evicted: list[tuple[str, str, str]] = []
        self.events: list[tuple[str, str, str]] = []
        self.deleted: list[str] = []

    async def evict(self, wl: dict[str, Any], reason: str, message: str) -> None:
        self.evicted.append((wl["metadata"]["name"], reason, message))

    def emit(self, obj: dict[str, Any], type_: str, reason: str, action: str, note: str) -> None:
        self.events.append((type_, reason, note))

    async def delete(self, res: Any, name: str, namespace: str | None = None) -> None:
        self.deleted.append(name)


def run(action: Callable[[], Awaitable[None]]) -> None:
    async def go() -> None:
        await action()

    asyncio.run(go())


Actions = list[Callable[[], Awaitable[None]]]


def setup(leading: list[bool] | None = None) -> tuple[Cache, Recorder, Actions, Enforcer]:
    cache = Cache(None, (k.PODS, k.JOBS, k.WORKLOADS, k.NODES, k.RESOURCE_FLAVORS))  # type: ignore[arg-type]
    rec = Recorder()
    actions: list[Callable[[], Awaitable[None]]] = []
    enforcer = Enforcer(
        rec,  # type: ignore[arg-type]
        cache,
        rec,  # type: ignore[arg-type]
        rec,  # type: ignore[arg-type]
        lambda key, act: actions.append(act),
        leading=lambda: True if leading is None else leading[0],
    )
    cache.store(k.RESOURCE_FLAVORS).apply(
        "ADDED",
        {"metadata": {"name": "a100", "resourceVersion": "1"}, "spec": {"nodeLabels": {"g": "a"}}},
    )
    cache.store(k.NODES).apply(
        "ADDED", {"metadata": {"name": "n0", "resourceVersion": "1", "labels": {"g": "a"}}}
    )
    return cache, rec, actions, enforcer


def admitted(name: str, pods: int, labels: dict[str, str] | None = None) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": "ns", "resourceVersion": "1", "labels": labels},
        "spec": {"podSets": [{"name": "main", "count": pods}]},
        "status": {
            "admission": {
                "clusterQueue": "cq",
                "podSetAssignments": [
                    {
                        "name": "main",
                        "count": pods,
                        "flavors": {GPU: "a100"},
                        "resourceUsage": {GPU: str(pods)},
                    }
                ],
            },
            "conditions": [{"type": names.COND_QUOTA_RESERVED, "status": "True"}],
        },
    }


def pod(name: str, rv: str = "1", job: str | None = "train", **labels: str) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "name": name,
        "namespace": "ns",
        "uid": f"uid-{name}",
        "resourceVersion": rv,
        "labels": labels,
        "creationTimestamp": f"2026-01-01T00:00:0{len(name) % 10}Z",
    }
    if job is not None:
        meta["ownerReferences"] = [
            {"apiVersion": "batch/v1", "kind": "Job", "name": job, "uid": "j1", "controller": True}
        ]
    spec = {"nodeName": "n0", "containers": [{"name": "c", "resources": {"limits": {GPU: "1"}}}]}
    return {"metadata": meta, "spec": spec, "status": {"phase": "Running"}}


def test_a_pod_claiming_an_admitted_job_evicts_it_even_once_released() -> None:
    cache, rec, actions, _ = setup()
    cache.store(k.JOBS).apply(
        "ADDED",
        {
            "metadata": {
                "name": "train",
                "namespace": "ns",
                "uid": "j1",
                "resourceVersion": "1",
                "labels": {names.LABEL_WORKLOAD: "job-train-1"},
            }
        },
    )
    cache.store(k.WORKLOADS).apply("ADDED", admitted("job-train-1", 2))
    pods = cache.store(k.PODS)
    pods.apply("ADDED", pod("train-a"))
    pods.apply("ADDED", pod("train-b"))
    assert actions == []
    pods.apply("ADDED", pod("rogue-pod"))
    pods.apply("MODIFIED", pod("rogue-pod", rv="2", job=None))  # the Job controller lets go
    assert len(actions) == 1
    run(actions[0])
    ((wl, reason, message),) = rec.evicted
    assert (wl, reason) == ("job-train-1", names.REASON_EVICTED_PODS_EXCEED_ADMISSION)
    assert "3 pods run, 2 admitted" in message and "rogue-pod" in message
    ((type_, event, note),) = rec.events
    assert (type_, event) == ("Warning", names.EVENT_PODS_EXCEED_ADMISSION)
    assert "rogue-pod" in note
    assert rec.deleted == []


def test_a_pod_groups_excess_pod_is_deleted_and_the_group_keeps_running() -> None:
    cache, rec, actions, _ = setup()
    group = {names.LABEL_POD_GROUP_NAME: "sweep"}
    cache.store(k.WORKLOADS).apply("ADDED", admitted("podgroup-sweep-1", 2, group))
    pods = cache.store(k.PODS)
    for name in ("w-0", "w-1", "w-22"):  # the third one's gate lifted by hand
        pods.apply("ADDED", pod(name, job=None, **{names.LABEL_WORKLOAD: "podgroup-sweep-1"}))
    assert len(actions) == 1
    run(actions[0])
    assert rec.evicted == []
    assert rec.deleted == ["w-22"]
    assert "the excess pods are deleted" in rec.events[0][2]


def test_a_standby_replica_judges_nothing_until_it_leads() -> None:
    leading = [False]
    cache, rec, actions, enforcer = setup(leading)
    group = {names.LABEL_POD_GROUP_NAME: "sweep"}
    cache.store(k.WORKLOADS).apply("ADDED", admitted("podgroup-sweep-1", 1, group))
    for name in ("w-0", "w-11"):
        cache.store(k.PODS).apply(
            "ADDED", pod(name, job=None, **{names.LABEL_WORKLOAD: "podgroup-sweep-1"})
        )
    assert actions == []
    leading[0] = True
    enforcer.reindex()  # what its loop does first once it leads
    assert len(actions) == 1
    run(actions[0])
    assert rec.deleted == ["w-11"]
