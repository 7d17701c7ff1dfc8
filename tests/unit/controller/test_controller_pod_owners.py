"""Pod -> Workload for every kind: a plain pod group's pod names its Workload itself, a Job's pod
finds it on its Job, a JobSet's pod two controllers up. A pod is ours only when a Workload
holding quota stands behind it: pods of kinds nobody queues, and pods that merely carry a queue
label, are foreign."""

from __future__ import annotations

from typing import Any

import pytest

from queuectl.api import names
from queuectl.api.resource import Obj, Resource
from queuectl.controller.watch import kube as k
from queuectl.controller.watch.podowners import Owners, is_ours, pod_workload

JOBSETS = Resource("jobset.x-k8s.io", "v1alpha2", "jobsets", True, "JobSet")


def obj(name: str, uid: str, labels: dict[str, str] | None = None, owner: Obj | None = None) -> Obj:
    meta: dict[str, Any] = {"name": name, "namespace": "ns", "uid": uid, "labels": labels or {}}
    if owner is not None:
        meta["ownerReferences"] = [{**owner, "controller": True}]
    return {"metadata": meta, "status": {"phase": "Running"}}


def ref(kind: str, name: str, uid: str) -> Obj:
    return {"apiVersion": "x/v1", "kind": kind, "name": name, "uid": uid}


CACHED = {
    (JOBSETS, "train"): obj("train", "js1", {names.LABEL_WORKLOAD: "jobset-train-1"}),
    (k.JOBS, "train-workers-0"): obj("train-workers-0", "j1", owner=ref("JobSet", "train", "js1")),
    (k.JOBS, "etl"): obj("etl", "j2"),
    (k.JOBS, "done"): obj("done", "j3", {names.LABEL_WORKLOAD: "job-done-1"}),
}
HELD = {"ns/pod-g-1", "ns/jobset-train-1"}
"""The Workloads the cache holds with quota reserved."""


def owners() -> Owners:
    return Owners(lambda res, name, ns: CACHED.get((res, name)), [k.JOBS, JOBSETS])


@pytest.mark.parametrize(
    ("case", "pod", "workload", "ours"),
    [
        (
            "a plain pod group's pod names its Workload",
            obj("p-0", "p0", {names.LABEL_WORKLOAD: "pod-g-1", names.LABEL_QUEUE_NAME: "q"}),
            "ns/pod-g-1",
            True,
        ),
        (
            "a JobSet's pod, through its child Job",
            obj("w-0", "p1", owner=ref("Job", "train-workers-0", "j1")),
            "ns/jobset-train-1",
            True,
        ),
        ("a Job nobody queued", obj("etl-0", "p2", owner=ref("Job", "etl", "j2")), None, False),
        (
            "a Job the cache has not seen yet",
            obj("new-0", "p3", owner=ref("Job", "new", "j9")),
            None,
            True,
        ),
        (
            "a newer Job of the same name",
            obj("etl-1", "p4", owner=ref("Job", "etl", "older")),
            None,
            True,
        ),
        (
            "a ReplicaSet's pod",
            obj("web-0", "p5", owner=ref("ReplicaSet", "web", "r1")),
            None,
            False,
        ),
        (
            "a queue-labelled pod with no Workload behind it (its gate lifted by hand)",
            obj("g-0", "p6", {names.LABEL_QUEUE_NAME: "q"}),
            None,
            False,
        ),
        (
            "a ReplicaSet's pod with a queue label",
            obj("web-1", "p7", {names.LABEL_QUEUE_NAME: "q"}, ref("ReplicaSet", "web", "r1")),
            None,
            False,
        ),
        (
            "a pod naming a Workload nobody created",
            obj("x-0", "p8", {names.LABEL_WORKLOAD: "made-up"}),
            "ns/made-up",
            False,
        ),
        (
            "a pod of a Job whose Workload holds no quota",
            obj("done-0", "p9", owner=ref("Job", "done", "j3")),
            "ns/job-done-1",
            False,
        ),
        (
            "a queue-labelled pod claiming a queued Job under a wrong uid",
            obj("d-1", "p10", {names.LABEL_QUEUE_NAME: "q"}, ref("Job", "done", "forged")),
            None,
            True,  # as an owner not seen yet; the garbage collector deletes it
        ),
    ],
)
def test_a_pods_workload_and_whether_it_is_ours(
    case: str, pod: Obj, workload: str | None, ours: bool
) -> None:
    assert pod_workload(pod, owners()) == workload, case
    assert is_ours(pod, owners(), HELD.__contains__) == ours, case


def test_a_finished_pod_leads_to_no_workload() -> None:
    pod = obj("p-0", "p0", {names.LABEL_WORKLOAD: "pod-g-1"})
    pod["status"]["phase"] = "Succeeded"
    assert pod_workload(pod, owners()) is None
