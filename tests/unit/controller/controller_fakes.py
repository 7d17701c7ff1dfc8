"""Shared fakes for the controller's unit tests: an in-memory API server, a World around it.

The fake honours what the controller relies on: merge patches, resourceVersion preconditions
(409 on a stale write), create conflicts and 404s. The real API server runs the same flows in
tests/integration and e2e/.
"""

from __future__ import annotations

import asyncio
import copy
import itertools
from collections.abc import Callable
from typing import Any

from queuectl.api import names
from queuectl.api.resource import Resource
from queuectl.controller.feed.feed import Feed
from queuectl.controller.watch import kube as k
from queuectl.controller.watch.cache import Cache
from queuectl.controller.watch.kube import KubeError, Obj
from queuectl.controller.watch.workload_pods import WorkloadPods
from queuectl.controller.workloads.decisions import Decisions
from queuectl.controller.workloads.events import EventRecorder
from queuectl.controller.workloads.pods_ready import PodsReadyOptions
from queuectl.controller.workloads.reconcile import Reconciler
from queuectl.core import Scheduler
from queuectl.core import types as core
from queuectl.core.results import Eviction, Preemption
from queuectl.jobs.batch import BatchJob


def merge(target: dict[str, Any], patch: dict[str, Any]) -> dict[str, Any]:
    for key, value in patch.items():
        if value is None:
            target.pop(key, None)
        elif isinstance(value, dict) and isinstance(target.get(key), dict):
            merge(target[key], value)
        else:
            target[key] = copy.deepcopy(value)
    return target


class FakeKube:
    def __init__(self) -> None:
        self.objects: dict[tuple[str, str, str], dict[str, Any]] = {}
        self.rv = itertools.count(100)
        self.writes: list[tuple[str, str, str]] = []

    def _key(self, res: Resource, name: str, ns: str | None) -> tuple[str, str, str]:
        return (res.plural, ns or "", name)

    def put(self, res: Resource, obj: dict[str, Any]) -> dict[str, Any]:
        obj = copy.deepcopy(obj)
        obj["metadata"]["resourceVersion"] = str(next(self.rv))
        obj["metadata"].setdefault("uid", f"uid-{obj['metadata']['name']}")
        obj["metadata"].setdefault("generation", 1)
        self.objects[self._key(res, obj["metadata"]["name"], obj["metadata"].get("namespace"))] = (
            obj
        )
        return copy.deepcopy(obj)

    async def get(self, res: Resource, name: str, namespace: str | None = None) -> Obj:
        obj = self.objects.get(self._key(res, name, namespace))
        if obj is None:
            raise KubeError(404, "NotFound", name)
        return copy.deepcopy(obj)

    async def create(self, res: Resource, body: Obj, namespace: str | None = None) -> Obj:
        if self._key(res, body["metadata"]["name"], namespace) in self.objects:
            raise KubeError(409, "AlreadyExists", body["metadata"]["name"])
        self.writes.append(("create", res.plural, body["metadata"]["name"]))
        body = copy.deepcopy(body)
        body["metadata"]["creationTimestamp"] = "2025-01-01T00:00:00Z"
        return self.put(res, body)

    async def patch(
        self,
        res: Resource,
        name: str,
        patch: Any,
        namespace: str | None = None,
        *,
        content_type: str = "",
        sub: str = "",
        force: bool = False,
    ) -> Obj:
        current = await self.get(res, name, namespace)
        want = (patch.get("metadata") or {}).get("resourceVersion")
        if want and want != current["metadata"]["resourceVersion"]:
            raise KubeError(409, "Conflict", "the object has been modified")
        patch = copy.deepcopy(patch)
        patch.get("metadata", {}).pop("resourceVersion", None)
        self.writes.append(("patch" + (f"/{sub}" if sub else ""), res.plural, name))
        return self.put(res, merge(current, patch))

    async def delete(self, res: Resource, name: str, namespace: str | None = None, **_: Any) -> Obj:
        self.writes.append(("delete", res.plural, name))
        return self.objects.pop(self._key(res, name, namespace), {})


class RecordingScheduler(Scheduler):
    def __init__(self) -> None:
        super().__init__()
        self.requeued: list[str] = []

    def requeue_workload(self, key: str, *, not_before: float = 0.0, front: bool = False) -> None:
        self.requeued.append(key)
        super().requeue_workload(key, not_before=not_before, front=front)


class World:
    """A fake API server, the controller's cache kept in step by hand, and a clock."""

    def __init__(self, pods_ready: PodsReadyOptions | None = None) -> None:
        """With `pods_ready`, the reconciler keeps its startup and recovery timeouts, its
        Ready pods read from the pods added to the cache (a changed one queues a timer now)."""
        self.kube = FakeKube()
        self.cache = Cache(self.kube)  # type: ignore[arg-type]
        self.sched = RecordingScheduler()
        self.now = 1_735_689_600.0
        self.timers: list[tuple[float, str]] = []
        self.feed = Feed(self.cache, self.sched, lambda: None, lambda _: None, lambda *_: None)
        events = EventRecorder(self.kube)  # type: ignore[arg-type]
        self.rec = Reconciler(
            self.kube,  # type: ignore[arg-type]
            self.cache,
            self.feed,
            self.sched,
            {"Job": BatchJob()},
            events,
            lambda when, key: self.timers.append((when, key)),
            lambda: self.now,
            pods_ready=pods_ready,
            ready_pods=(
                WorkloadPods(self.cache, lambda key: self.timers.append((self.now, key)))
                if pods_ready is not None
                else None
            ),
        )
        self.add(
            k.NAMESPACES,
            {"metadata": {"name": "ns", "labels": {"kubernetes.io/metadata.name": "ns"}}},
        )
        self.add(
            k.RESOURCE_FLAVORS,
            {
                "metadata": {"name": "h100"},
                "spec": {"nodeLabels": {names.LABEL_GPU_PRODUCT: "H100"}},
            },
        )
        self.add(
            k.CLUSTER_QUEUES,
            {
                "metadata": {"name": "cq"},
                "spec": {
                    "namespaceSelector": {},
                    "resourceGroups": [
                        {
                            "coveredResources": [names.GPU_RESOURCE],
                            "flavors": [
                                {
                                    "name": "h100",
                                    "resources": [{"name": names.GPU_RESOURCE, "nominalQuota": 8}],
                                }
                            ],
                        }
                    ],
                },
            },
        )
        self.add(
            k.LOCAL_QUEUES,
            {"metadata": {"name": "lq", "namespace": "ns"}, "spec": {"clusterQueue": "cq"}},
        )
        self.add(
            k.PRIORITY_CLASSES_OURS,
            {"metadata": {"name": "low"}, "value": 5, "preemptionGracePeriodSeconds": 60},
        )

    def decisions(self, *, sleep: Callable[[float], Any] = asyncio.sleep) -> WorkerDecisions:
        """The core's decisions as the controller's worker serves them."""
        return WorkerDecisions(self, sleep)

    def add(self, res: Resource, obj: dict[str, Any]) -> dict[str, Any]:
        stored = self.kube.put(res, obj)
        self.cache.store(res).apply("ADDED", stored)
        return stored

    def job(self) -> dict[str, Any]:
        return self.cache.get(k.JOBS, "train", "ns")  # type: ignore[return-value]

    def workload(self) -> dict[str, Any]:
        (wl,) = self.cache.store(k.WORKLOADS).values()
        return wl


class WorkerDecisions:
    """Each decision as the controller's worker serves it (`Controller._serve`): the decision
    as an action under the Workload's key, then one reconcile of that key."""

    def __init__(self, w: World, sleep: Callable[[float], Any]) -> None:
        self.rec = w.rec
        self.decisions = Decisions(w.rec.writes, w.rec.jobs, w.sched, w.rec.at, sleep=sleep)

    async def admit(self, key: str, admission: core.Admission) -> bool:
        admitted = await self.decisions.admit(key, admission)
        await self.rec.reconcile(key)
        return admitted

    async def preempt(self, p: Preemption) -> None:
        await self.decisions.preempt(p)
        await self.rec.reconcile(p.victim)

    async def apply_eviction(self, e: Eviction) -> None:
        await self.decisions.apply_eviction(e)
        await self.rec.reconcile(e.key)


def new_job(suspend: bool = True, priority_class: str = "low") -> dict[str, Any]:
    """Job `ns/train` for LocalQueue `lq`: one pod of 8 GPUs."""
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": "train",
            "namespace": "ns",
            "labels": {names.LABEL_QUEUE_NAME: "lq", names.LABEL_PRIORITY_CLASS: priority_class},
        },
        "spec": {
            "suspend": suspend,
            "parallelism": 1,
            "template": {
                "spec": {
                    "containers": [
                        {"name": "c", "resources": {"requests": {names.GPU_RESOURCE: "8"}}}
                    ]
                }
            },
        },
    }


ADMISSION = core.Admission(
    "cq", (core.PodSetAssignment("main", 1, {names.GPU_RESOURCE: "h100"}, {names.GPU_RESOURCE: 8}),)
)


async def queued(w: World, job: dict[str, Any]) -> str:
    """Add the Job and reconcile it: the key of the Workload it now has."""
    w.add(k.JOBS, job)
    key = await w.rec.reconcile_job("Job", job["metadata"]["namespace"], job["metadata"]["name"])
    assert key is not None
    return key


async def job_event(w: World, name: str = "train", namespace: str = "ns") -> str | None:
    """A Job's event as the controller serves it: the job's key (its Workload made or adopted),
    then, when it has one, its Workload's key."""
    key = await w.rec.reconcile_job("Job", namespace, name)
    if key is not None:
        await w.rec.reconcile(key)
    return key


async def admitted_world() -> tuple[World, str]:
    """The World with the Job `train` admitted (ADMISSION) and started."""
    w = World()
    key = await queued(w, new_job())
    assert await w.decisions().admit(key, ADMISSION)
    return w, key


def gpu_node(name: str, *, unschedulable: bool = False) -> dict[str, Any]:
    """A Ready node with 8 healthy H100 GPUs."""
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {names.LABEL_GPU_PRODUCT: "H100", names.LABEL_GPU_HEALTHY_COUNT: "8"},
        },
        "spec": {"unschedulable": unschedulable} if unschedulable else {},
        "status": {
            "allocatable": {names.GPU_RESOURCE: "8", "pods": "110"},
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }
