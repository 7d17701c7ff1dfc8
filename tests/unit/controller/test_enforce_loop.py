"""The enforcement loop's shell: from pod events to an eviction (a job kind) or deleted pods (a
plain pod group), with a Warning Event naming the pods. A pod that claims an admitted Job is
caught on its first event, even when the Job controller releases it a moment later."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from queuectl.api import names
from queuectl.controller.enforcement import enforce_loop
from queuectl.controller.enforcement.enforce_loop import Enforcer
from queuectl.controller.watch import kube as k
from queuectl.controller.watch import podowners, workload_pods
from queuectl.controller.watch.cache import Cache
from queuectl.controller.watch.workload_pods import WorkloadPods

GPU = names.GPU_RESOURCE


class Recorder:
    """Stands in for the Workload writes, the event recorder and the API client."""

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


def group_pod(name: str) -> dict[str, Any]:
    """A pod of group `sweep`, queued and gated by queuectl, ungated by its admission."""
    labels = {
        names.LABEL_QUEUE_NAME: "lq",
        names.LABEL_POD_GROUP_NAME: "sweep",
        names.LABEL_WORKLOAD: "podgroup-sweep-1",
        names.LABEL_CLUSTER_QUEUE: "cq",
    }
    return pod(name, job=None, **labels)


def waiting(wl: dict[str, Any]) -> dict[str, Any]:
    """The same Workload, made again under its name: no admission, waiting."""
    out = {**wl, "metadata": {**wl["metadata"], "resourceVersion": "2"}}
    out["status"] = {}
    return out


def test_a_groups_pods_running_when_its_workload_is_deleted_are_deleted() -> None:
    """An LWS remade after a template change, or a user deleting the Workload: the quota goes
    with the Workload, and the pods that admission ungated must not run on without it."""
    cache, rec, actions, _ = setup()
    group = {names.LABEL_POD_GROUP_NAME: "sweep"}
    wl = admitted("podgroup-sweep-1", 2, group)
    cache.store(k.WORKLOADS).apply("ADDED", wl)
    for name in ("w-0", "w-1"):
        cache.store(k.PODS).apply("ADDED", group_pod(name))
    assert actions == []
    cache.store(k.WORKLOADS).apply("DELETED", wl)
    assert len(actions) == 1
    run(actions[0])
    assert rec.deleted == ["w-0", "w-1"] and rec.evicted == []


def test_a_groups_workload_made_again_and_waiting_leaves_no_pod_running() -> None:
    cache, rec, actions, _ = setup()
    group = {names.LABEL_POD_GROUP_NAME: "sweep"}
    wl = admitted("podgroup-sweep-1", 2, group)
    cache.store(k.WORKLOADS).apply("ADDED", wl)
    cache.store(k.PODS).apply("ADDED", group_pod("w-0"))
    cache.store(k.WORKLOADS).apply("MODIFIED", waiting(wl))
    assert len(actions) == 1
    run(actions[0])
    assert rec.deleted == ["w-0"]
    ((type_, event, note),) = rec.events
    assert (type_, event) == ("Warning", names.EVENT_PODS_EXCEED_ADMISSION)
    assert "holds no quota" in note and "w-0" in note


def test_a_pod_ungated_by_a_workload_that_is_gone_is_deleted_on_its_first_event() -> None:
    cache, rec, actions, _ = setup()
    cache.store(k.PODS).apply("ADDED", group_pod("w-0"))
    assert len(actions) == 1
    run(actions[0])
    assert rec.deleted == ["w-0"]


def test_a_jobs_pods_are_left_to_the_reconciler_when_its_workload_holds_no_quota() -> None:
    """A Job can be suspended: the reconciler does it; the enforcement loop deletes nothing."""
    cache, rec, actions, _ = setup()
    job = {"name": "train", "namespace": "ns", "uid": "j1", "resourceVersion": "1"}
    job["labels"] = {names.LABEL_WORKLOAD: "job-train-1"}  # type: ignore[assignment]
    cache.store(k.JOBS).apply("ADDED", {"metadata": job})
    wl = admitted("job-train-1", 1)
    cache.store(k.WORKLOADS).apply("ADDED", wl)
    cache.store(k.PODS).apply("ADDED", pod("train-a"))
    cache.store(k.WORKLOADS).apply("MODIFIED", waiting(wl))
    cache.store(k.WORKLOADS).apply("DELETED", wl)
    assert actions == [] and rec.deleted == []


def test_an_evicted_group_whose_pods_are_going_is_not_judged_again() -> None:
    """Eviction keeps the quota until the pods are gone; pods being deleted hold no claim."""
    cache, _, actions, _ = setup()
    group = {names.LABEL_POD_GROUP_NAME: "sweep"}
    wl = admitted("podgroup-sweep-1", 1, group)
    cache.store(k.WORKLOADS).apply("ADDED", wl)
    going = group_pod("w-0")
    cache.store(k.PODS).apply("ADDED", going)
    going = {**going, "metadata": {**going["metadata"], "resourceVersion": "2"}}
    going["metadata"]["deletionTimestamp"] = "2026-01-01T00:01:00Z"
    cache.store(k.PODS).apply("MODIFIED", going)
    cache.store(k.WORKLOADS).apply("MODIFIED", waiting(wl))
    assert actions == []


def test_one_owner_chain_walk_per_pod_event_for_the_enforcer_and_the_pods_ready_index(
    monkeypatch: Any,
) -> None:
    """The controller's wiring: the enforcer reads the pods-ready index, so a Job's pod event
    walks the pod's owner chain once (it was walked twice, once per index)."""
    cache = Cache(None, (k.PODS, k.JOBS, k.WORKLOADS, k.NODES, k.RESOURCE_FLAVORS))  # type: ignore[arg-type]
    walks: list[str] = []
    real_claim = workload_pods.claim

    def counting(pod: Any, owners: Any) -> Any:
        walks.append(pod["metadata"]["name"])
        return real_claim(pod, owners)

    monkeypatch.setattr(workload_pods, "claim", counting)
    monkeypatch.setattr(podowners, "claim", counting)  # any other reader's walk counts too
    monkeypatch.setattr(enforce_loop, "claim", counting, raising=False)
    rec = Recorder()
    index = WorkloadPods(cache, lambda _: None)
    enforcer = Enforcer(
        rec,  # type: ignore[arg-type]
        cache,
        rec,  # type: ignore[arg-type]
        rec,  # type: ignore[arg-type]
        lambda key, act: None,
        pods=index,
    )
    job = {"metadata": {"name": "train", "namespace": "ns", "uid": "j1", "resourceVersion": "1"}}
    job["metadata"]["labels"] = {names.LABEL_WORKLOAD: "job-train"}
    cache.store(k.JOBS).apply("ADDED", job)
    cache.store(k.WORKLOADS).apply("ADDED", admitted("job-train", 2))
    for i, name in enumerate(("train-0", "train-1", "train-0")):
        cache.store(k.PODS).apply("MODIFIED" if i == 2 else "ADDED", pod(name, rv=str(i + 2)))
    assert walks == ["train-0", "train-1", "train-0"]
    assert sorted(p["metadata"]["name"] for p in enforcer.pods_of("ns/job-train")) == [
        "train-0",
        "train-1",
    ]
    assert enforcer._gpus == {"ns/job-train": 2}
