"""Pods outside queuectl take room on nodes: a notebook holding 8 GPUs on a node must keep a
gang from being placed there, and so must any running pod no admitted Workload stands behind,
whatever labels it carries."""

from __future__ import annotations

from typing import Any

import pytest

from queuectl.api import names
from queuectl.api.resource import Resource
from queuectl.controller.feed.foreign import ForeignPods, foreign_usage
from queuectl.controller.watch import kube as k
from queuectl.controller.watch.cache import Cache
from queuectl.controller.watch.podowners import Owners

GPU = names.GPU_RESOURCE


def pod(
    name: str,
    gpus: int = 8,
    node: str | None = "gpu-0",
    phase: str = "Running",
    job: str | None = None,
) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": "ns", "resourceVersion": "1"}
    if job is not None:
        meta["ownerReferences"] = [
            {"apiVersion": "batch/v1", "kind": "Job", "name": job, "controller": True}
        ]
    spec: dict[str, Any] = {
        "containers": [{"name": "c", "resources": {"limits": {GPU: str(gpus)}}}]
    }
    if node is not None:
        spec["nodeName"] = node
    return {"metadata": meta, "spec": spec, "status": {"phase": phase}}


def placeholder() -> dict[str, Any]:
    obj = pod("train-cap-main-0")
    obj["metadata"]["labels"] = {names.LABEL_PLACEHOLDER_FOR: "job-train-1234"}
    return obj


JOBS = {
    "queued": {names.LABEL_QUEUE_NAME: "gpu"},
    "admitted": {names.LABEL_WORKLOAD: "job-admitted-1234"},
    "released": {names.LABEL_WORKLOAD: "job-released-1234"},
    "plain": {"app": "etl"},
}
HELD = {"ns/job-admitted-1234", "ns/jobset-js-1234"}


def labelled(obj: dict[str, Any], **labels: str) -> dict[str, Any]:
    obj["metadata"]["labels"] = labels
    return obj


def replica_set_pod(name: str, **labels: str) -> dict[str, Any]:
    obj = labelled(pod(name), **labels)
    obj["metadata"]["ownerReferences"] = [
        {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web", "controller": True}
    ]
    return obj


@pytest.mark.parametrize(
    ("case", "obj", "counted"),
    [
        ("a notebook pod on gpu-0", pod("nb"), True),
        ("a pod of a Job nobody queued", pod("etl-x", job="plain"), True),
        ("a running pod of a queued Job no Workload admits", pod("train-x", job="queued"), True),
        ("a pod of a Job whose Workload released its quota", pod("r-x", job="released"), True),
        (
            "a ReplicaSet's pod with a queue label",
            replica_set_pod("web-x", **{names.LABEL_QUEUE_NAME: "gpu"}),
            True,
        ),
        (
            "a bare pod naming a Workload nobody created",
            labelled(pod("bare"), **{names.LABEL_WORKLOAD: "made-up"}),
            True,
        ),
        (
            "a bare pod with a queue label, its gate lifted by hand",
            labelled(pod("ungated"), **{names.LABEL_QUEUE_NAME: "gpu"}),
            True,
        ),
        ("a pod of an admitted Job", pod("train-y", job="admitted"), False),
        ("a pod of a Job the cache has not seen yet", pod("new-x", job="unseen"), False),
        ("a pod not bound to a node", pod("pending", node=None), False),
        ("a pod that finished", pod("done", phase="Succeeded"), False),
        (
            "a JobSet's pod: its child Job is plain, the pod carries the workload label",
            {
                **pod("js-x", job="plain"),
                "metadata": {
                    **pod("js-x", job="plain")["metadata"],
                    "labels": {names.LABEL_WORKLOAD: "jobset-js-1234"},
                },
            },
            False,
        ),
        ("a provisioning placeholder (it gives way)", placeholder(), False),
    ],
)
def test_which_pods_count_as_foreign(case: str, obj: dict[str, Any], counted: bool) -> None:
    def get(res: Resource, name: str, namespace: str) -> dict[str, Any] | None:
        labels = JOBS.get(name) if res == k.JOBS else None
        return None if labels is None else {"metadata": {"name": name, "labels": labels}}

    found = foreign_usage(obj, Owners(get, [k.JOBS]), HELD.__contains__)
    assert (found is not None) == counted, case
    if found is not None:
        assert found == ("gpu-0", {GPU: 8, "pods": 1})


def test_a_nodes_total_follows_its_foreign_pods_and_each_change_is_announced() -> None:
    cache = Cache(None, (k.PODS, k.JOBS))  # type: ignore[arg-type]
    changed: list[str] = []
    foreign = ForeignPods(cache, changed.append)
    pods = cache.store(k.PODS)
    pods.apply("ADDED", pod("a", gpus=2))
    pods.apply("ADDED", pod("b", gpus=4))
    assert foreign.used("gpu-0") == {GPU: 6, "pods": 2}
    moved = pod("b", gpus=4, node="gpu-1")
    moved["metadata"]["resourceVersion"] = "2"
    pods.apply("MODIFIED", moved)
    assert foreign.used("gpu-0") == {GPU: 2, "pods": 1}
    assert foreign.used("gpu-1") == {GPU: 4, "pods": 1}
    pods.apply("DELETED", pod("a", gpus=2))  # finished: it left the watch's selection
    assert foreign.used("gpu-0") == {}
    assert sorted(changed) == ["gpu-0"] * 4 + ["gpu-1"]  # each change names its node(s)


def workload(name: str, held: bool, rv: str) -> dict[str, Any]:
    status: dict[str, Any] = {}
    if held:
        status = {
            "admission": {"clusterQueue": "cq", "podSetAssignments": []},
            "conditions": [{"type": names.COND_QUOTA_RESERVED, "status": "True"}],
        }
    return {
        "metadata": {"name": name, "namespace": "ns", "resourceVersion": rv},
        "status": status,
    }


def test_a_pod_is_ours_while_its_workload_holds_quota_whichever_arrives_first() -> None:
    """At start the pod watch may fill before the Workload watch: the admitted job's pod is
    foreign until its Workload is seen holding quota, and foreign again once it releases it."""
    cache = Cache(None, (k.PODS, k.JOBS, k.WORKLOADS))  # type: ignore[arg-type]
    changed: list[str] = []
    foreign = ForeignPods(cache, changed.append)
    cache.store(k.JOBS).apply(
        "ADDED",
        {
            "metadata": {
                "name": "admitted",
                "namespace": "ns",
                "resourceVersion": "1",
                "labels": JOBS["admitted"],
            }
        },
    )
    cache.store(k.PODS).apply("ADDED", pod("train-0", job="admitted"))
    assert foreign.used("gpu-0") == {GPU: 8, "pods": 1}
    workloads = cache.store(k.WORKLOADS)
    workloads.apply("ADDED", workload("job-admitted-1234", True, "1"))
    assert foreign.used("gpu-0") == {}
    workloads.apply("MODIFIED", workload("job-admitted-1234", False, "2"))
    assert foreign.used("gpu-0") == {GPU: 8, "pods": 1}
    workloads.apply("MODIFIED", workload("job-admitted-1234", True, "3"))
    workloads.apply("DELETED", workload("job-admitted-1234", True, "3"))
    assert foreign.used("gpu-0") == {GPU: 8, "pods": 1}
    assert changed == ["gpu-0"] * 5
