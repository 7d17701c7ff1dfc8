"""The built-in provisioning check over the in-memory API server: a reservation the nodes can
hold is Ready at once; one they cannot asks for capacity (placeholder pods, or a
ProvisioningRequest when the check's parameters name a class) and is Ready when it is there;
no capacity in time is Retry with everything withdrawn (docs/design/provisioning.md)."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from controller_fakes import ADMISSION, World, gpu_node, new_job, queued

from queuectl import metrics
from queuectl.api import names
from queuectl.api.views import WorkloadView
from queuectl.controller.admission import checks
from queuectl.controller.admission.provision import (
    POD_TEMPLATES,
    PROVISION_TIMEOUT_S,
    PROVISIONING_REQUESTS,
)
from queuectl.controller.watch import kube as k

CHECK = "capacity"


def provision_check(parameters: dict[str, Any] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"controllerName": names.CHECK_PROVISIONING}
    if parameters is not None:
        spec["parameters"] = parameters
    return {"metadata": {"name": CHECK}, "spec": spec}


PROVREQ = {
    "apiGroup": names.PROVREQ_GROUP,
    "kind": names.PROVREQ_PARAMETERS_KIND,
    "name": "check-capacity.autoscaling.x-k8s.io",
}


async def world(check: dict[str, Any], *nodes: dict[str, Any]) -> World:
    w = World()
    for node in nodes:
        w.add(k.NODES, node)
    w.add(k.ADMISSION_CHECKS, check)
    cq = copy.deepcopy(w.cache.get(k.CLUSTER_QUEUES, "cq"))
    assert cq is not None
    cq["spec"]["admissionChecks"] = [CHECK]
    w.add(k.CLUSTER_QUEUES, cq)
    await w.rec.builtin_checks.sync_check(CHECK)
    return w


async def reserve(w: World) -> str:
    key = await queued(w, new_job())
    assert await w.decisions().admit(key, ADMISSION)
    return key


def stored(w: World, plural: str) -> list[dict[str, Any]]:
    """What the fake API server holds of a kind (pods: only placeholders)."""
    return [
        o
        for (p, _, _), o in w.kube.objects.items()
        if p == plural
        and (p != "pods" or names.LABEL_PLACEHOLDER_FOR in (o["metadata"].get("labels") or {}))
    ]


def entry(w: World) -> dict[str, Any]:
    (e,) = checks.entries(w.workload())
    return e


def bind(w: World, pod: dict[str, Any], node: str) -> None:
    """What the kube-scheduler does once an autoscaler's node is there."""
    bound = copy.deepcopy(pod)
    bound["spec"]["nodeName"] = node
    bound.setdefault("status", {})["phase"] = "Running"
    w.add(k.PODS, bound)


async def test_a_reservation_the_nodes_hold_is_ready_at_once_and_asks_for_nothing() -> None:
    w = await world(provision_check(), gpu_node("n1"))
    await reserve(w)
    assert entry(w)["state"] == "Ready"
    assert "nothing to provision" in entry(w)["message"]
    assert WorkloadView(w.workload()).is_admitted and w.job()["spec"]["suspend"] is False
    assert stored(w, "pods") == [] and stored(w, "priorityclasses") == []


async def test_no_room_makes_placeholder_pods_of_the_exact_shape_at_the_lowest_priority() -> None:
    busy = gpu_node("n1")
    w = await world(provision_check(), busy)
    w.add(  # the node's 8 GPUs are taken by a pod of someone else
        k.PODS,
        {
            "metadata": {"name": "other", "namespace": "x"},
            "spec": {
                "nodeName": "n1",
                "containers": [{"name": "c", "resources": {"requests": {names.GPU_RESOURCE: "8"}}}],
            },
            "status": {"phase": "Running"},
        },
    )
    await reserve(w)
    assert entry(w)["state"] == "Pending" and "0 of 1 placeholder" in entry(w)["message"]
    assert not WorkloadView(w.workload()).is_admitted and w.job()["spec"]["suspend"] is True
    (pc,) = stored(w, "priorityclasses")
    assert pc["metadata"]["name"] == names.PRIORITY_CLASS_PLACEHOLDER
    assert pc["value"] == names.PRIORITY_PLACEHOLDER_VALUE and pc["preemptionPolicy"] == "Never"
    (pod,) = stored(w, "pods")
    spec = pod["spec"]
    assert spec["priorityClassName"] == names.PRIORITY_CLASS_PLACEHOLDER
    assert spec["containers"][0]["resources"] == {"requests": {names.GPU_RESOURCE: "8"}}
    terms = spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert terms["nodeSelectorTerms"] == [
        {
            "matchExpressions": [
                {"key": names.LABEL_GPU_PRODUCT, "operator": "In", "values": ["H100"]}
            ]
        }
    ]
    assert pod["metadata"]["ownerReferences"][0]["kind"] == "Workload"
    assert (
        metrics.CONTROLLER_PROVISION_PENDING_GPUS.labels("h100", names.GPU_RESOURCE)._value.get()
        == 8
    )


async def test_placeholders_bound_on_new_nodes_make_it_ready_and_give_way_to_the_job() -> None:
    w = await world(provision_check())  # no nodes at all
    key = await reserve(w)
    (pod,) = stored(w, "pods")
    w.add(k.NODES, gpu_node("karpenter-1"))
    bind(w, pod, "karpenter-1")
    assert w.timers[-1][1] == key  # the bound placeholder brings the workload back
    await w.rec.reconcile(key)
    assert entry(w)["state"] == "Ready"
    assert "bound on karpenter-1" in entry(w)["message"]
    assert ("delete", "pods", pod["metadata"]["name"]) in w.kube.writes
    assert WorkloadView(w.workload()).is_admitted and w.job()["spec"]["suspend"] is False
    gauge = metrics.CONTROLLER_PROVISION_REQUESTS.labels("placeholders", "Pending")
    assert gauge._value.get() == 0


async def test_no_capacity_in_time_is_retry_with_the_placeholders_withdrawn() -> None:
    w = await world(provision_check())
    key = await reserve(w)
    assert len(stored(w, "pods")) == 1
    assert max(t for t, _ in w.timers) >= w.now + PROVISION_TIMEOUT_S  # it wakes up for this
    w.now += PROVISION_TIMEOUT_S + 1
    await w.rec.reconcile(key)
    assert stored(w, "pods") == []
    wl = w.workload()
    assert not WorkloadView(wl).holds_quota  # released, requeued with back-off
    assert "no capacity within 600s" in entry(w)["message"]


async def test_a_workload_deleted_while_waiting_has_its_placeholders_withdrawn() -> None:
    w = await world(provision_check())
    key = await reserve(w)
    (pod,) = stored(w, "pods")
    wl = w.workload()
    w.kube.objects.pop((k.WORKLOADS.plural, "ns", wl["metadata"]["name"]))
    w.cache.store(k.WORKLOADS).apply("DELETED", wl)
    assert w.timers[-1][1] == key
    await w.rec.reconcile(key)
    assert stored(w, "pods") == []
    assert ("delete", "pods", pod["metadata"]["name"]) in w.kube.writes


async def test_a_placeholder_whose_workload_no_longer_waits_is_deleted() -> None:
    w = await world(provision_check(), gpu_node("n1"))
    await reserve(w)  # fits: Ready, no placeholder of its own
    stray = {
        "metadata": {
            "name": "train-cap-main-0",
            "namespace": "ns",
            "labels": {names.LABEL_PLACEHOLDER_FOR: w.workload()["metadata"]["name"]},
            "ownerReferences": [
                {"kind": "Workload", "name": w.workload()["metadata"]["name"], "uid": "u"}
            ],
        },
        "spec": {"nodeName": "n1", "containers": []},
    }
    w.kube.put(k.PODS, stray)
    w.add(k.PODS, stray)
    key = WorkloadView(w.workload()).key
    assert w.timers[-1][1] == key  # the pod event only queues the workload: listeners never write
    assert ("delete", "pods", "train-cap-main-0") not in w.kube.writes
    await w.rec.reconcile(key)
    assert ("delete", "pods", "train-cap-main-0") in w.kube.writes


# --- cluster-autoscaler's ProvisioningRequest -------------------------------------------------
async def test_parameters_naming_a_class_make_a_provisioning_request_and_its_templates() -> None:
    w = await world(provision_check(PROVREQ), gpu_node("n1"))
    await reserve(w)
    (req,) = stored(w, "provisioningrequests")
    (template,) = stored(w, "podtemplates")
    assert req["apiVersion"] == "autoscaling.x-k8s.io/v1"
    assert req["spec"] == {
        "provisioningClassName": "check-capacity.autoscaling.x-k8s.io",
        "podSets": [{"podTemplateRef": {"name": template["metadata"]["name"]}, "count": 1}],
    }
    assert template["template"]["spec"]["priorityClassName"] == names.PRIORITY_CLASS_PLACEHOLDER
    assert entry(w)["state"] == "Pending" and "created" in entry(w)["message"]


@pytest.mark.parametrize(
    ("condition", "state", "withdrawn"),
    [
        ("Provisioned", "Ready", False),
        ("Failed", "Retry", True),
        ("BookingExpired", "Retry", True),
    ],
)
async def test_the_provisioning_request_state_decides_the_check(
    condition: str, state: str, withdrawn: bool
) -> None:
    w = await world(provision_check(PROVREQ))
    key = await reserve(w)
    (req,) = stored(w, "provisioningrequests")
    name = req["metadata"]["name"]
    req = copy.deepcopy(req)
    req["status"] = {"conditions": [{"type": condition, "status": "True", "message": "m"}]}
    w.kube.put(PROVISIONING_REQUESTS, req)
    await w.rec.reconcile(key)
    if state == "Ready":
        assert entry(w)["state"] == "Ready" and WorkloadView(w.workload()).is_admitted
    else:
        assert not WorkloadView(w.workload()).holds_quota
        assert condition in entry(w)["message"]
    assert (("delete", PROVISIONING_REQUESTS.plural, name) in w.kube.writes) is withdrawn
    templates = [o for o in stored(w, POD_TEMPLATES.plural)]
    assert (templates == []) is withdrawn


@pytest.mark.parametrize(
    ("parameters", "problem"),
    [
        ({"apiGroup": "example.com", "kind": "Config", "name": "x"}, "not understood"),
        ({**PROVREQ, "name": "queued-provisioning.gke.io"}, "not one queuectl knows"),
    ],
)
async def test_parameters_it_cannot_use_keep_the_check_inactive_saying_why(
    parameters: dict[str, Any], problem: str
) -> None:
    w = await world(provision_check(parameters))
    obj = w.cache.get(k.ADMISSION_CHECKS, CHECK)
    assert obj is not None and not WorkloadView(obj).is_true(names.COND_ACTIVE)
    cond = WorkloadView(obj).condition(names.COND_ACTIVE)
    assert cond is not None and problem in cond["message"]


async def test_time_from_reservation_to_admission_is_observed() -> None:
    w = await world(provision_check())
    key = await reserve(w)
    (pod,) = stored(w, "pods")
    hist = metrics.CONTROLLER_RESERVATION_TO_ADMISSION.labels("cq")
    before = hist._sum.get()
    w.now += 42
    w.add(k.NODES, gpu_node("karpenter-1"))
    bind(w, pod, "karpenter-1")
    await w.rec.reconcile(key)
    assert WorkloadView(w.workload()).is_admitted
    assert hist._sum.get() - before == pytest.approx(42)
