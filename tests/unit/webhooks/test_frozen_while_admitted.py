"""Admitted means frozen: while a job's Workload holds quota, what decides where its pods run
(nodeSelector, node affinity, tolerations, nodeName, the GPU resource) is as frozen as its
shape, for every kind. A user moves an admitted PyTorchJob from the A100 flavor's nodes to the
H100's: refused, naming the field. The controller places it (exempt); a waiting job may still
change (its Workload follows)."""

from __future__ import annotations

import copy
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from webhook_cases import request

from queuectl.api import names
from queuectl.webhooks.jobs import validate_job
from queuectl.webhooks.lookup import InMemoryLookup

SAMPLES = Path(__file__).resolve().parents[1] / "jobs" / "samples"
NS = "team-a"
A100 = {"gpu.example.com/model": "a100"}
H100 = {"gpu.example.com/model": "h100"}
CONTROLLER = names.CONTROLLER_USERNAME
Path_ = tuple[str | int, ...]


def sample(name: str, kind: str | None = None) -> dict[str, Any]:
    for doc in yaml.safe_load_all((SAMPLES / name).read_text()):
        if kind is None or doc.get("kind") == kind:
            return dict(doc)
    raise AssertionError(f"no {kind} in {name}")


def batch_job() -> dict[str, Any]:
    container = {"name": "c", "image": "x", "resources": {"limits": {names.GPU_RESOURCE: "8"}}}
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "train", "namespace": NS, "labels": {names.LABEL_QUEUE_NAME: "lq"}},
        "spec": {"parallelism": 2, "template": {"spec": {"containers": [container]}}},
    }


def gvk(group: str, version: str, kind: str) -> dict[str, str]:
    return {"group": group, "version": version, "kind": kind}


# kind, the job, its AdmissionReview kind, where one pod template sits, how refusals name it
KINDS: list[tuple[str, Callable[[], dict[str, Any]], dict[str, str], Path_, str]] = [
    ("Job", batch_job, gvk("batch", "v1", "Job"), ("spec", "template"), "spec.template"),
    (
        "JobSet",
        lambda: sample("jobset-driver-workers.yaml"),
        gvk("jobset.x-k8s.io", "v1alpha2", "JobSet"),
        ("spec", "replicatedJobs", 1, "template", "spec", "template"),
        "spec.replicatedJobs[1].template.spec.template",
    ),
    (
        "RayJob",
        lambda: sample("rayjob.yaml"),
        gvk("ray.io", "v1", "RayJob"),
        ("spec", "rayClusterSpec", "workerGroupSpecs", 0, "template"),
        "spec.rayClusterSpec.workerGroupSpecs[0].template",
    ),
    (
        "RayCluster",
        lambda: sample("raycluster.yaml"),
        gvk("ray.io", "v1", "RayCluster"),
        ("spec", "workerGroupSpecs", 0, "template"),
        "spec.workerGroupSpecs[0].template",
    ),
    (
        "PyTorchJob",
        lambda: sample("pytorchjob.yaml"),
        gvk("kubeflow.org", "v1", "PyTorchJob"),
        ("spec", "pytorchReplicaSpecs", "Worker", "template"),
        "spec.pytorchReplicaSpecs.Worker.template",
    ),
    (
        "MPIJob",
        lambda: sample("mpijob.yaml"),
        gvk("kubeflow.org", "v2beta1", "MPIJob"),
        ("spec", "mpiReplicaSpecs", "Launcher", "template"),
        "spec.mpiReplicaSpecs.Launcher.template",
    ),
]


def at(obj: Any, path: Path_) -> Any:
    for step in path:
        obj = obj[step]
    return obj


def admitted(job: dict[str, Any], suspended: bool = False) -> dict[str, Any]:
    """The job as it runs once admitted: unsuspended, the A100 flavor's nodeSelector in."""
    out = copy.deepcopy(job)
    if out["kind"] in ("PyTorchJob", "MPIJob"):
        out["spec"].setdefault("runPolicy", {})["suspend"] = suspended
    else:
        out["spec"]["suspend"] = suspended
    return out


EDITS: list[tuple[str, str, Callable[[dict[str, Any]], None]]] = [
    ("another flavor's nodeSelector", "spec.nodeSelector", lambda s: s.update(nodeSelector=H100)),
    (
        "node affinity to the H100 nodes",
        "spec.affinity.nodeAffinity",
        lambda s: s.update(
            affinity={
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [
                            {
                                "matchExpressions": [
                                    {
                                        "key": "gpu.example.com/model",
                                        "operator": "In",
                                        "values": ["h100"],
                                    }
                                ]
                            }
                        ]
                    }
                }
            }
        ),
    ),
    (
        "a toleration of the H100 nodes' taint",
        "spec.tolerations",
        lambda s: s.update(tolerations=[{"key": "h100", "operator": "Exists"}]),
    ),
    ("pinned to a node", "spec.nodeName", lambda s: s.update(nodeName="h100-node-7")),
]


def edited(
    job: dict[str, Any], path: Path_, edit: Callable[[dict[str, Any]], None]
) -> dict[str, Any]:
    out = copy.deepcopy(job)
    edit(at(out, path).setdefault("spec", {}))
    return out


def lookup(job: dict[str, Any], is_admitted: bool) -> InMemoryLookup:
    ns, name = job["metadata"]["namespace"], job["metadata"]["name"]
    return InMemoryLookup(
        local_queues={(ns, "lq"): "cq-a"}, admitted_jobs={(ns, name)} if is_admitted else set()
    )


CASES = [
    pytest.param(kind, make, review_kind, path, said, field, edit, id=f"{kind}: {scenario}")
    for kind, make, review_kind, path, said in KINDS
    for scenario, field, edit in EDITS
]


@pytest.mark.parametrize(("kind", "make", "review_kind", "path", "said", "field", "edit"), CASES)
def test_a_user_cannot_move_an_admitted_job_to_other_nodes(
    kind: str,
    make: Callable[[], dict[str, Any]],
    review_kind: dict[str, str],
    path: Path_,
    said: str,
    field: str,
    edit: Callable[[dict[str, Any]], None],
) -> None:
    old = admitted(make())
    new = edited(old, path, edit)
    answer = validate_job(request(new, old, kind=review_kind), lookup(old, True))
    assert answer["allowed"] is False, kind
    message = answer["status"]["message"]
    assert f"{said}.{field}" in message and "while it is admitted" in message, message
    assert "create it again with the new placement" in message


@pytest.mark.parametrize(("kind", "make", "review_kind", "path", "said", "field", "edit"), CASES)
def test_the_controller_places_it_and_a_waiting_job_may_still_change(
    kind: str,
    make: Callable[[], dict[str, Any]],
    review_kind: dict[str, str],
    path: Path_,
    said: str,
    field: str,
    edit: Callable[[dict[str, Any]], None],
) -> None:
    old = admitted(make(), suspended=True)
    new = edited(old, path, edit)
    placing = request(new, old, kind=review_kind, user=CONTROLLER)
    assert validate_job(placing, lookup(old, True))["allowed"] is True, "the controller's"
    waiting = request(new, old, kind=review_kind)
    assert validate_job(waiting, lookup(old, False))["allowed"] is True, "a waiting job's"


def test_the_issue_a_pytorchjob_moved_from_the_a100_flavor_to_the_h100_nodes() -> None:
    """Finding 3: admitted on the A100 flavor (its nodeSelector injected), running; the user
    swaps the workers' node affinity for the H100 nodes. Before, only counts, requests and
    topology were compared, and this was allowed."""
    running = admitted(sample("pytorchjob.yaml"))
    worker = running["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]
    worker["nodeSelector"] = dict(A100)
    moved = copy.deepcopy(running)
    terms = moved["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]["affinity"][
        "nodeAffinity"
    ]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    terms[0]["matchExpressions"] = [
        {"key": "gpu.example.com/model", "operator": "In", "values": ["h100"]}
    ]
    review = request(moved, running, kind=gvk("kubeflow.org", "v1", "PyTorchJob"))
    answer = validate_job(review, lookup(running, True))
    assert answer["allowed"] is False
    assert (
        "spec.pytorchReplicaSpecs.Worker.template.spec.affinity.nodeAffinity"
        in answer["status"]["message"]
    )
