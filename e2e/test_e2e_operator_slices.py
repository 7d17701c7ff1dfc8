"""Sliced gangs of operator kinds on the real control plane: a JobSet (JobSet v0.11.0), a
PyTorchJob (training-operator v1.8.1) and a LeaderWorkerSet replica (lws v0.7.0).

The pins reach a JobSet's pods the long way: queuectl writes them on the replicated job's pod
template while the JobSet is suspended, JobSet copies template annotations onto its child Jobs
on resume, the Job controller onto the pods, and the pod webhook turns each pod's child-Job
index and completion index into its pin. Four child Jobs of two 8-GPU pods, slices of 2 per
NVLink domain and 4 per rack: each child Job's pods share an NVLink domain, each pair of child
Jobs a rack, each pod on the node the core chose for it. A PyTorchJob's workers are pinned by
the replica index the operator labels them with (their rank order). An LWS replica's pods are
gated, and each is ungated onto its own pin by its worker index; the enforcement loop still
knows them as the replica's (they keep running).
"""

from __future__ import annotations

import time
from typing import Any

import pytest

from e2e.harness import ControllerProcess, apply, items, wait_for
from e2e.slice_pool import (
    BLOCK,
    CLIQUE,
    RACK,
    assert_slices,
    assigned_nodes,
    occupy,
    placed,
    sliced_pool,
)
from queuectl.api import names
from queuectl.testenv.cluster import Cluster

pytestmark = pytest.mark.operator("jobset", "training-operator", "lws")

POD_LABEL = "jobset.sigs.k8s.io/jobset-name"


@pytest.fixture(scope="module")
def operators_running(operators: Any) -> None:
    operators("jobset")
    operators("training-operator")
    operators("lws")


@pytest.fixture(scope="module")
def queued(operators_running: None, controller: ControllerProcess) -> ControllerProcess:
    """The controller, started once the operators' CRDs are served (it watches them at once)."""
    return controller


def sliced_jobset(name: str, namespace: str) -> dict[str, Any]:
    gpus = {names.GPU_RESOURCE: "8"}
    annotations = {
        names.ANNOTATION_PODSET_REQUIRED_TOPOLOGY: BLOCK,
        names.ANNOTATION_PODSET_SLICE_REQUIRED_TOPOLOGY: f"{RACK},{CLIQUE}",
        names.ANNOTATION_PODSET_SLICE_SIZE: "4,2",
    }
    pod = {
        "metadata": {"annotations": annotations},
        "spec": {
            "restartPolicy": "Never",
            "terminationGracePeriodSeconds": 0,
            "containers": [
                {
                    "name": "main",
                    "image": "registry.k8s.io/pause:3.10",
                    "resources": {"requests": gpus, "limits": gpus},
                }
            ],
        },
    }
    job = {"parallelism": 2, "completions": 2, "backoffLimit": 0, "template": pod}
    return {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {names.LABEL_QUEUE_NAME: "lq"},
        },
        "spec": {"replicatedJobs": [{"name": "workers", "replicas": 4, "template": {"spec": job}}]},
    }


def index(pod: dict[str, Any]) -> int:
    labels = pod["metadata"]["labels"]
    return int(labels[names.LABEL_JOBSET_JOB_INDEX]) * 2 + int(
        labels[names.LABEL_JOB_COMPLETION_INDEX]
    )


def test_a_sliced_jobsets_pods_land_slice_by_slice_through_its_child_jobs(
    control_plane: Cluster, namespace: str, queued: ControllerProcess
) -> None:
    sliced_pool(control_plane, namespace, f"js{int(time.time()) % 100000}")
    apply(control_plane, sliced_jobset("gang", namespace))

    def pods() -> list[dict[str, Any]]:
        return items(control_plane, "pods", namespace, "-l", f"{POD_LABEL}=gang")

    at = placed(control_plane, pods, 8, index)
    assert_slices(at, (RACK, 4), (CLIQUE, 2))
    wl = wait_for(
        "the JobSet's Workload",
        lambda: next(
            (
                w
                for w in items(control_plane, "workloads.queuectl.io", namespace)
                if any(
                    r.get("kind") == "JobSet" for r in w["metadata"].get("ownerReferences") or []
                )
            ),
            None,
        ),
    )
    assert [at[i][names.LABEL_HOSTNAME] for i in range(8)] == assigned_nodes(wl)


def sliced_pytorch_job(name: str, namespace: str) -> dict[str, Any]:
    """A master and 8 workers of 8 GPUs in one block, the workers in slices of 4 per rack and 2
    per NVLink domain. The operator takes its rendezvous port from a container named `pytorch`."""
    gpus = {names.GPU_RESOURCE: "8"}

    def template(annotations: dict[str, str]) -> dict[str, Any]:
        container = {
            "name": "pytorch",
            "image": "registry.k8s.io/pause:3.10",
            "resources": {"requests": gpus, "limits": gpus},
        }
        return {
            "metadata": {
                "annotations": {names.ANNOTATION_PODSET_REQUIRED_TOPOLOGY: BLOCK, **annotations}
            },
            "spec": {"terminationGracePeriodSeconds": 0, "containers": [container]},
        }

    slices = {
        names.ANNOTATION_PODSET_SLICE_REQUIRED_TOPOLOGY: f"{RACK},{CLIQUE}",
        names.ANNOTATION_PODSET_SLICE_SIZE: "4,2",
    }
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {names.LABEL_QUEUE_NAME: "lq"},
        },
        "spec": {
            "pytorchReplicaSpecs": {
                "Master": {"replicas": 1, "restartPolicy": "OnFailure", "template": template({})},
                "Worker": {
                    "replicas": 8,
                    "restartPolicy": "OnFailure",
                    "template": template(slices),
                },
            }
        },
    }


def test_a_sliced_pytorchjobs_workers_land_slice_by_slice_in_rank_order(
    control_plane: Cluster, namespace: str, queued: ControllerProcess
) -> None:
    sliced_pool(control_plane, namespace, f"pt{int(time.time()) % 100000}")
    apply(control_plane, sliced_pytorch_job("train", namespace))

    def workers() -> list[dict[str, Any]]:
        return items(
            control_plane,
            "pods",
            namespace,
            "-l",
            "training.kubeflow.org/job-name=train,training.kubeflow.org/replica-type=worker",
        )

    def rank(pod: dict[str, Any]) -> int:
        return int(pod["metadata"]["labels"][names.LABEL_KUBEFLOW_REPLICA_INDEX])

    at = placed(control_plane, workers, 8, rank)
    assert_slices(at, (RACK, 4), (CLIQUE, 2))
    wl = wait_for(
        "the PyTorchJob's Workload",
        lambda: next(
            (
                w
                for w in items(control_plane, "workloads.queuectl.io", namespace)
                if any(
                    r.get("kind") == "PyTorchJob"
                    for r in w["metadata"].get("ownerReferences") or []
                )
            ),
            None,
        ),
    )
    [worker_set] = [
        ps for ps in wl["status"]["admission"]["podSetAssignments"] if ps["name"] == "worker"
    ]
    assert [at[i][names.LABEL_HOSTNAME] for i in range(8)] == assigned_nodes(
        {"status": {"admission": {"podSetAssignments": [worker_set]}}}
    )
    master = items(
        control_plane, "pods", namespace, "-l", "training.kubeflow.org/replica-type=master"
    )
    assert len(master) == 1 and master[0]["spec"].get("nodeName") not in {
        at[i][names.LABEL_HOSTNAME] for i in range(8)
    }


def sliced_lws(name: str, namespace: str) -> dict[str, Any]:
    """One replica of a leader and 7 workers, 8 GPUs each (one pod set: container names do not
    split a shape), in one block, slices of 4 per rack and 2 per NVLink domain."""
    annotations = {
        names.ANNOTATION_PODSET_REQUIRED_TOPOLOGY: BLOCK,
        names.ANNOTATION_PODSET_SLICE_REQUIRED_TOPOLOGY: f"{RACK},{CLIQUE}",
        names.ANNOTATION_PODSET_SLICE_SIZE: "4,2",
    }

    def template(role: str) -> dict[str, Any]:
        container = {
            "name": role,
            "image": "registry.k8s.io/pause:3.10",
            "resources": {"limits": {names.GPU_RESOURCE: "8"}},
        }
        return {
            "metadata": {"annotations": annotations},
            "spec": {"terminationGracePeriodSeconds": 0, "containers": [container]},
        }

    return {
        "apiVersion": "leaderworkerset.x-k8s.io/v1",
        "kind": "LeaderWorkerSet",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {names.LABEL_QUEUE_NAME: "lq"},
        },
        "spec": {
            "replicas": 1,
            "leaderWorkerTemplate": {
                "size": 8,
                "leaderTemplate": template("leader"),
                "workerTemplate": template("worker"),
            },
        },
    }


def test_an_lws_replica_in_slices_is_ungated_pod_by_pod_onto_its_nodes_and_keeps_running(
    control_plane: Cluster, namespace: str, queued: ControllerProcess
) -> None:
    prefix = f"lw{int(time.time()) % 100000}"
    nodes = sliced_pool(control_plane, namespace, prefix)
    # The first rack's first node is taken: that rack holds no slice of 4 any more, so the core
    # takes the other two, where kube-scheduler alone would fill the first rack's free nodes.
    occupy(control_plane, namespace, nodes[0], prefix)
    apply(control_plane, sliced_lws("serve", namespace))

    def pods() -> list[dict[str, Any]]:
        return items(
            control_plane, "pods", namespace, "-l", "leaderworkerset.sigs.k8s.io/name=serve"
        )

    def worker(pod: dict[str, Any]) -> int:
        return int(pod["metadata"]["labels"][names.LABEL_LWS_WORKER_INDEX])

    at = placed(control_plane, pods, 8, worker)
    assert_slices(at, (RACK, 4), (CLIQUE, 2))
    [wl] = items(control_plane, "workloads.queuectl.io", namespace)
    assert [at[i][names.LABEL_HOSTNAME] for i in range(8)] == assigned_nodes(wl)
    # Pinned pods are still the replica's own: none is deleted as running beyond its admission.
    time.sleep(3)
    assert len([p for p in pods() if not p["metadata"].get("deletionTimestamp")]) == 8
    [wl] = items(control_plane, "workloads.queuectl.io", namespace)
    assert wl["status"].get("admission")
