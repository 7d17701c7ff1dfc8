"""A pod group through the controller's steps, on the fake API server: its Workload appears
with the last pod, admission lifts every gate with the placement, eviction deletes the pods
and requeues the Workload, which then waits for replacement pods."""

from __future__ import annotations

from typing import Any

from controller_fakes import World

from queuectl.api import names
from queuectl.api.views import WorkloadView
from queuectl.controller.watch import kube as k
from queuectl.core import types as core
from queuectl.jobs import podgroup as pg

AFFINITY = "requiredDuringSchedulingIgnoredDuringExecution"


def group_pod(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": "ns",
            "labels": {names.LABEL_QUEUE_NAME: "lq", names.LABEL_POD_GROUP_NAME: "g"},
            "annotations": {names.ANNOTATION_POD_GROUP_TOTAL_COUNT: "2"},
        },
        "spec": {
            "schedulingGates": [{"name": pg.GATE}],
            "containers": [{"name": "c", "resources": {"requests": {names.GPU_RESOURCE: "4"}}}],
        },
        "status": {"phase": "Pending"},
    }


def add_pod(w: World, pod: dict[str, Any]) -> None:
    stored = w.kube.put(k.PODS, pod)
    w.cache.queued_pods.apply("ADDED", stored)


def pods(w: World) -> list[dict[str, Any]]:
    return sorted(w.cache.queued_pods.values(), key=lambda p: p["metadata"]["name"])


async def test_a_group_runs_when_admitted_and_waits_for_new_pods_after_eviction() -> None:
    w = World()
    key = pg.GroupKey("ns", "g")
    add_pod(w, group_pod("g-0"))
    assert await w.rec.reconcile_group(key) is None  # 1 of 2: no Workload
    assert not w.cache.store(k.WORKLOADS).values()
    add_pod(w, group_pod("g-1"))
    wl_key = await w.rec.reconcile_group(key)
    assert wl_key is not None
    wl = w.workload()
    assert wl["metadata"]["labels"][names.LABEL_POD_GROUP_NAME] == "g"
    (ps,) = wl["spec"]["podSets"]
    assert ps["count"] == 2
    assert wl_key not in w.feed.withheld

    admission = core.Admission(
        "cq", (core.PodSetAssignment(ps["name"], 2, {names.GPU_RESOURCE: "h100"}, {}),)
    )
    assert await w.decisions().admit(wl_key, admission)
    await w.rec.reconcile(wl_key)
    for pod in pods(w):
        assert not pg.is_gated(pod)
        terms = pod["spec"]["affinity"]["nodeAffinity"][AFFINITY]["nodeSelectorTerms"]
        assert terms == [
            {
                "matchExpressions": [
                    {"key": names.LABEL_GPU_PRODUCT, "operator": "In", "values": ["H100"]}
                ]
            }
        ]
        assert pod["metadata"]["labels"][names.LABEL_WORKLOAD] == wl["metadata"]["name"]

    await w.rec.evict(w.workload(), names.REASON_EVICTED_PREEMPTION, "preempted")
    deleted = [name for op, res, name in w.kube.writes if (op, res) == ("delete", "pods")]
    assert sorted(deleted) == ["g-0", "g-1"]
    assert WorkloadView(w.workload()).holds_quota  # until its pods are gone
    for pod in pods(w):
        w.cache.queued_pods.apply("DELETED", pod)
    await w.rec.reconcile(wl_key)
    wl = w.workload()
    assert not WorkloadView(wl).holds_quota and WorkloadView(wl).is_true(names.COND_REQUEUED)
    assert w.sched.requeued == [wl_key]
    reason, _ = w.feed.withheld[wl_key]
    assert reason == names.REASON_POD_GROUP_INCOMPLETE  # waits for replacement pods
    add_pod(w, group_pod("g-0"))
    add_pod(w, group_pod("g-1"))
    assert await w.rec.reconcile_group(key) == wl_key
    assert wl_key not in w.feed.withheld  # offered to the core again
