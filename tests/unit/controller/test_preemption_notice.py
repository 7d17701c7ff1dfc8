"""The preemption notice reaches the trainer: a preempted Workload's running pods get the
deadline annotation (read in a container through a downwardAPI volume), for a job's pods and a
pod group's alike; written once per pod, never to a pod that will not be stopped, and never in
the way of the eviction at the deadline."""

from __future__ import annotations

from typing import Any

from controller_fakes import ADMISSION, FakeKube, World, new_job, queued
from test_controller_pod_group_steps import add_pod, group_pod

from queuectl import convert
from queuectl.api import names
from queuectl.api.views import ObjectView, WorkloadView
from queuectl.controller.watch import kube as k
from queuectl.controller.watch.kube import KubeError, Obj
from queuectl.controller.workloads import notice
from queuectl.controller.workloads.pods_ready import PodsReadyOptions
from queuectl.core import types as core
from queuectl.core.results import Preemption
from queuectl.jobs import podgroup as pg

NO_TIMEOUTS = PodsReadyOptions(timeout_s=0, recovery_s=0)
"""The pod index on, the pods-ready timeouts off: only the notice is under test."""
GRACE_S = 60.0


def job_pod(w: World, name: str, *, node: str | None = "n1", phase: str = "Running") -> Obj:
    job = w.job()
    ref = {"kind": "Job", "name": "train", "uid": job["metadata"]["uid"], "controller": True}
    spec: dict[str, Any] = {"nodeName": node} if node else {}
    return {
        "metadata": {"name": name, "namespace": "ns", "ownerReferences": [ref]},
        "spec": spec,
        "status": {"phase": phase, "conditions": [{"type": "Ready", "status": "True"}]},
    }


def told(w: World, name: str) -> str | None:
    """The notice pod `name` carries on the API server (None: none, or no such pod)."""
    pod = w.kube.objects.get(("pods", "ns", name))
    return None if pod is None else ObjectView(pod).annotation(names.ANNOTATION_PREEMPTION_DEADLINE)


def pod_patches(w: World, since: int = 0) -> list[str]:
    return [name for op, res, name in w.kube.writes[since:] if (op, res) == ("patch", "pods")]


async def running_job(*pods: tuple[str, str | None, str]) -> tuple[World, str]:
    """Job `train` admitted and started, with `pods` (name, node, phase) in the cache."""
    w = World(pods_ready=NO_TIMEOUTS)
    key = await queued(w, new_job())
    assert await w.decisions().admit(key, ADMISSION)
    for name, node, phase in pods:
        w.add(k.PODS, job_pod(w, name, node=node, phase=phase))
    return w, key


def preemption(w: World, key: str) -> Preemption:
    return Preemption(key, "ns/other", "InClusterQueue", "priority", w.now + GRACE_S)


def refusing(kube: FakeKube) -> Any:
    """The fake's patch, but every pod annotation write is refused (a webhook down, a 500)."""
    plain = kube.patch

    async def patch(res: Any, name: str, body: Any, namespace: str | None = None, **kw: Any) -> Obj:
        if res is k.PODS and "annotations" in (body.get("metadata") or {}):
            raise KubeError(500, "InternalError", "etcdserver: request timed out")
        return await plain(res, name, body, namespace, **kw)

    return patch


async def test_a_preempted_jobs_running_pods_are_told_the_deadline_once() -> None:
    """Job `train` runs two pods on nodes; a third waits for the scheduler and a fourth has
    succeeded. Preempted with a 60-second grace: both running pods carry the deadline (on the
    API server and in the cache), the others do not; the next reconcile writes nothing."""
    w, key = await running_job(
        ("train-0", "n1", "Running"),
        ("train-1", "n2", "Running"),
        ("train-2", None, "Pending"),
        ("train-3", "n1", "Succeeded"),
    )
    await w.decisions().preempt(preemption(w, key))
    stamp = convert.format_time(w.now + GRACE_S)
    assert [told(w, f"train-{i}") for i in range(4)] == [stamp, stamp, None, None]
    cached = w.cache.get(k.PODS, "train-0", "ns") or {}
    assert ObjectView(cached).annotation(names.ANNOTATION_PREEMPTION_DEADLINE) == stamp
    assert (w.now + GRACE_S, key) in w.timers

    before = len(w.kube.writes)
    w.now += 10
    await w.rec.reconcile(key)
    assert pod_patches(w, before) == []  # every running pod already has it


async def test_a_pod_that_starts_during_the_grace_period_is_told_and_none_after_the_deadline() -> (
    None
):
    """The waiting pod is bound during the grace period: its event brings the Workload back and
    it is told too. At the deadline the Workload is evicted, and no pod is written then."""
    w, key = await running_job(("train-0", "n1", "Running"), ("train-1", None, "Pending"))
    await w.decisions().preempt(preemption(w, key))
    assert told(w, "train-1") is None
    w.now += 30
    w.add(k.PODS, job_pod(w, "train-1", node="n2"))
    await w.rec.reconcile(key)
    assert told(w, "train-1") == convert.format_time(w.now - 30 + GRACE_S)

    w.add(k.PODS, job_pod(w, "train-2", node="n3"))  # too late to be told
    before = len(w.kube.writes)
    w.now += 31
    await w.rec.reconcile(key)
    assert WorkloadView(w.workload()).is_true(names.COND_EVICTED)
    assert pod_patches(w, before) == []


async def test_a_pod_gone_or_replaced_before_its_notice_is_skipped() -> None:
    """The cache still holds a pod the API server has deleted, and one replaced by a new pod
    of the same name (another uid): neither write fails the step, the live pod is told."""
    w, key = await running_job(
        ("train-0", "n1", "Running"), ("train-1", "n1", "Running"), ("train-2", "n1", "Running")
    )
    del w.kube.objects[("pods", "ns", "train-1")]
    w.kube.objects[("pods", "ns", "train-2")]["metadata"]["uid"] = "a-new-pod"
    w.kube.patch = uid_checked(w.kube)  # type: ignore[method-assign]
    await w.decisions().preempt(preemption(w, key))
    assert told(w, "train-0") == convert.format_time(w.now + GRACE_S)
    assert told(w, "train-2") is None
    assert WorkloadView(w.workload()).is_true(names.COND_PREEMPTED)


def uid_checked(kube: FakeKube) -> Any:
    """The fake's patch with the API server's uid precondition (409 on another uid)."""
    plain = kube.patch

    async def patch(res: Any, name: str, body: Any, namespace: str | None = None, **kw: Any) -> Obj:
        want = (body.get("metadata") or {}).get("uid")
        current = kube.objects.get((res.plural, namespace or "", name))
        if want and current is not None and current["metadata"]["uid"] != want:
            raise KubeError(409, "Conflict", "Precondition failed: UID in precondition")
        return await plain(res, name, body, namespace, **kw)

    return patch


async def test_refused_notices_are_retried_until_the_deadline_and_never_hold_the_eviction() -> None:
    """Every pod write is refused: the step does not fail, tries again 5 seconds later, and at
    the deadline the Workload is evicted all the same."""
    w, key = await running_job(("train-0", "n1", "Running"))
    w.kube.patch = refusing(w.kube)  # type: ignore[method-assign]
    await w.decisions().preempt(preemption(w, key))
    assert told(w, "train-0") is None
    assert (w.now + notice.RETRY_S, key) in w.timers
    assert w.rec.stats.get("pod_notices_refused") == 1
    w.now += GRACE_S
    await w.rec.reconcile(key)
    assert WorkloadView(w.workload()).is_true(names.COND_EVICTED)


async def preempted_group(w: World) -> str:
    """Group `g` of two pods admitted, running on nodes, and preempted with a 60 s grace."""
    key = pg.GroupKey("ns", "g")
    add_pod(w, group_pod("g-0"))
    add_pod(w, group_pod("g-1"))
    wl_key = await w.rec.reconcile_group(key)
    assert wl_key is not None
    (ps,) = w.workload()["spec"]["podSets"]
    admission = core.Admission(
        "cq", (core.PodSetAssignment(ps["name"], 2, {names.GPU_RESOURCE: "h100"}, {}),)
    )
    assert await w.decisions().admit(wl_key, admission)
    for name in ("g-0", "g-1"):
        pod = w.kube.objects[("pods", "ns", name)]
        pod["spec"]["nodeName"] = "n1"
        pod["status"] = {"phase": "Running"}
        w.cache.queued_pods.apply("MODIFIED", w.kube.put(k.PODS, pod))
    return wl_key


async def test_a_preempted_groups_gated_replacement_pod_is_not_told() -> None:
    """A pod group is preempted while a replacement pod, still gated, already exists (an LWS
    recreates a pod at once): the running pods are told, the gated one is not, so it never
    starts later with a stale notice."""
    w = World()
    wl_key = await preempted_group(w)
    add_pod(w, group_pod("g-2"))
    await w.decisions().preempt(preemption(w, wl_key))
    stamp = convert.format_time(w.now + GRACE_S)
    assert [told(w, n) for n in ("g-0", "g-1", "g-2")] == [stamp, stamp, None]
    assert pg.is_gated(w.kube.objects[("pods", "ns", "g-2")])


async def test_a_group_whose_notices_are_refused_is_still_evicted_at_its_deadline() -> None:
    """The API server refuses the notices (each time): at the deadline the group is evicted
    and its pods deleted all the same."""
    w = World()
    wl_key = await preempted_group(w)
    w.kube.patch = refusing(w.kube)  # type: ignore[method-assign]
    await w.decisions().preempt(preemption(w, wl_key))
    w.now += GRACE_S
    await w.rec.reconcile(wl_key)
    assert WorkloadView(w.workload()).is_true(names.COND_EVICTED)
    deleted = [name for op, res, name in w.kube.writes if (op, res) == ("delete", "pods")]
    assert sorted(deleted) == ["g-0", "g-1"]


def test_only_running_pods_lacking_the_current_stamp_are_written() -> None:
    def pod(name: str, **kw: Any) -> Obj:
        meta: dict[str, Any] = {"name": name, "annotations": kw.get("annotations", {})}
        if kw.get("deleting"):
            meta["deletionTimestamp"] = "t"
        spec = {"nodeName": "n1"} if kw.get("bound", True) else {}
        return {"metadata": meta, "spec": spec, "status": {"phase": kw.get("phase", "Running")}}

    key = names.ANNOTATION_PREEMPTION_DEADLINE
    pods = [
        pod("new"),
        pod("stale", annotations={key: "2025-01-01T00:00:00Z"}),
        pod("current", annotations={key: "2025-01-01T00:01:00Z"}),
        pod("pending", bound=False),
        pod("done", phase="Succeeded"),
        pod("failed", phase="Failed"),
        pod("deleting", deleting=True),
    ]
    lacking = notice.lacking(pods, "2025-01-01T00:01:00Z")
    assert [p["metadata"]["name"] for p in lacking] == ["new", "stale"]
