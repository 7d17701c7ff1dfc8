"""The real workload operators reconcile their samples on the local control plane.

Each operator is built from its Go module (once, cached), its CRDs come from its own module, and
it runs as a process beside kube-controller-manager. A sample shaped like the operator's own
samples must turn into the objects the operator makes, and those pods must land on the kwok
GPU nodes and be marked Running: the ground that queueing each kind stands on.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
import yaml
from kubernetes import client as k8s

from queuectl.testenv import Cluster, eventually
from queuectl.testenv.pytest_plugin import StandardFleet

POD = {"restartPolicy": "Never", "containers": [{"name": "main", "image": "busybox"}]}


def _pod(**extra: Any) -> dict[str, Any]:
    return {"spec": {**POD, **extra}}


JOBSET = {
    "apiVersion": "jobset.x-k8s.io/v1alpha2",
    "kind": "JobSet",
    "metadata": {"name": "sample"},
    "spec": {
        "replicatedJobs": [
            {
                "name": "workers",
                "replicas": 2,
                "template": {
                    "spec": {
                        "parallelism": 2,
                        "completions": 2,
                        "backoffLimit": 0,
                        "template": _pod(),
                    }
                },
            }
        ]
    },
}

LWS = {
    "apiVersion": "leaderworkerset.x-k8s.io/v1",
    "kind": "LeaderWorkerSet",
    "metadata": {"name": "sample"},
    "spec": {
        "replicas": 1,
        "leaderWorkerTemplate": {
            "size": 3,
            "workerTemplate": {"spec": {"containers": [{"name": "main", "image": "nginx"}]}},
        },
    },
}

RAY_CLUSTER = {
    "apiVersion": "ray.io/v1",
    "kind": "RayCluster",
    "metadata": {"name": "sample"},
    "spec": {
        "headGroupSpec": {
            "rayStartParams": {},
            "template": {
                "spec": {"containers": [{"name": "ray-head", "image": "rayproject/ray:2.46.0"}]}
            },
        },
        "workerGroupSpecs": [
            {
                "groupName": "gpu",
                "replicas": 2,
                "minReplicas": 2,
                "maxReplicas": 2,
                "rayStartParams": {},
                "template": {
                    "spec": {
                        "containers": [{"name": "ray-worker", "image": "rayproject/ray:2.46.0"}]
                    }
                },
            }
        ],
    },
}

_TORCH = {"spec": {"containers": [{"name": "pytorch", "image": "docker.io/pytorch/pytorch"}]}}
PYTORCH_JOB = {
    "apiVersion": "kubeflow.org/v1",
    "kind": "PyTorchJob",
    "metadata": {"name": "sample"},
    "spec": {
        "pytorchReplicaSpecs": {
            "Master": {"replicas": 1, "restartPolicy": "OnFailure", "template": _TORCH},
            "Worker": {"replicas": 2, "restartPolicy": "OnFailure", "template": _TORCH},
        }
    },
}

_MPI = {"spec": {"containers": [{"name": "mpi", "image": "mpioperator/mpi-pi:openmpi"}]}}
MPI_JOB = {
    "apiVersion": "kubeflow.org/v2beta1",
    "kind": "MPIJob",
    "metadata": {"name": "sample"},
    "spec": {
        "slotsPerWorker": 1,
        "mpiReplicaSpecs": {
            "Launcher": {"replicas": 1, "template": _MPI},
            "Worker": {"replicas": 2, "template": _MPI},
        },
    },
}

RUNTIME = {
    "apiVersion": "trainer.kubeflow.org/v1alpha1",
    "kind": "ClusterTrainingRuntime",
    "metadata": {"name": "queuectl-test-torch"},
    "spec": {
        "mlPolicy": {"numNodes": 1, "torch": {"numProcPerNode": "auto"}},
        "template": {
            "spec": {
                "replicatedJobs": [
                    {
                        "name": "node",
                        "template": {
                            "metadata": {
                                "labels": {"trainer.kubeflow.org/trainjob-ancestor-step": "trainer"}
                            },
                            "spec": {
                                "template": {
                                    "spec": {
                                        "containers": [{"name": "node", "image": "pytorch/pytorch"}]
                                    }
                                }
                            },
                        },
                    }
                ]
            }
        },
    },
}

TRAIN_JOB = {
    "apiVersion": "trainer.kubeflow.org/v1alpha1",
    "kind": "TrainJob",
    "metadata": {"name": "sample"},
    "spec": {"runtimeRef": {"name": "queuectl-test-torch"}, "trainer": {"numNodes": 2}},
}


def _pods(api: k8s.ApiClient, namespace: str, selector: str) -> list[k8s.V1Pod]:
    return list(k8s.CoreV1Api(api).list_namespaced_pod(namespace, label_selector=selector).items)


def _running_on(fleet: StandardFleet, pods: list[k8s.V1Pod]) -> dict[str, tuple[str, str]]:
    """Each pod's (node, phase), with node blank where it is not one of the kwok GPU nodes."""
    nodes = {n.name for n in fleet.all}
    return {
        p.metadata.name: (p.spec.node_name if p.spec.node_name in nodes else "", p.status.phase)
        for p in pods
    }


def _count_running(expected: int) -> Callable[[dict[str, tuple[str, str]]], bool]:
    return lambda seen: (
        len(seen) == expected and all(node and phase == "Running" for node, phase in seen.values())
    )


@dataclass(frozen=True)
class Case:
    operator: str
    manifests: tuple[dict[str, Any], ...]
    pod_selector: str  # selects the pods the operator makes for the sample
    pods: int
    made: tuple[str, str]  # (kubectl resource, name): an object the operator must create


CASES = [
    Case(
        "jobset",
        (JOBSET,),
        "jobset.sigs.k8s.io/jobset-name=sample",
        4,
        ("jobs.batch", "sample-workers-1"),
    ),
    Case(
        "lws",
        (LWS,),
        "leaderworkerset.sigs.k8s.io/name=sample",
        3,
        ("statefulsets.apps", "sample"),
    ),
    Case(
        "ray",
        (RAY_CLUSTER,),
        "ray.io/cluster=sample",
        3,
        ("services", "sample-head-svc"),
    ),
    Case(
        "training-operator",
        (PYTORCH_JOB,),
        "training.kubeflow.org/job-name=sample",
        3,
        ("services", "sample-master-0"),
    ),
    Case(
        "mpi-operator",
        (MPI_JOB,),
        "training.kubeflow.org/operator-name=mpi-operator,training.kubeflow.org/job-name=sample",
        3,
        ("jobs.batch", "sample-launcher"),
    ),
    Case(
        "trainer",
        (TRAIN_JOB,),
        "jobset.sigs.k8s.io/jobset-name=sample",
        2,
        ("jobsets.jobset.x-k8s.io", "sample"),
    ),
]


TRAINER_CACHE_LAG = "specified clusterTrainingRuntime must be"
"""trainer's own webhook reads runtimes from its informer cache: a TrainJob applied right after
its runtime may be refused as naming no runtime, until that cache catches up (upstream; a user
applies again)."""


def apply_once_its_runtime_is_seen(
    cluster: Cluster, namespace: str, manifest: dict[str, Any]
) -> None:
    """`kubectl apply`; again, for at most 30 s, while trainer's webhook has not seen the runtime
    applied just before. Any other refusal fails at once."""

    def applied() -> bool:
        done = cluster.kubectl(
            "apply", "-n", namespace, "-f", "-", input=yaml.safe_dump(manifest), check=False
        )
        if done.returncode != 0 and TRAINER_CACHE_LAG not in done.stderr:
            raise AssertionError(f"kubectl apply refused: {done.stderr}")
        return done.returncode == 0

    eventually(applied, timeout=30, interval=1.0, what=f"trainer accepting {manifest['kind']}")


def _exists(cluster: Cluster, namespace: str, made: tuple[str, str]) -> bool:
    resource, name = made
    return cluster.kubectl("get", "-n", namespace, resource, name, check=False).returncode == 0


@pytest.mark.parametrize(
    "case",
    [pytest.param(c, marks=pytest.mark.operator(c.operator), id=c.operator) for c in CASES],
)
def test_operator_reconciles_its_sample_into_running_pods_on_kwok_nodes(
    case: Case,
    control_plane: Cluster,
    k8s_client: k8s.ApiClient,
    operators: Callable[[str], None],
    gpu_nodes: StandardFleet,
    namespace: str,
) -> None:
    operators(case.operator)
    if case.operator == "trainer":
        # A TrainJob is run by a JobSet: the JobSet operator must run too, with a runtime.
        operators("jobset")
        control_plane.kubectl("apply", "--server-side", "-f", "-", input=yaml.safe_dump(RUNTIME))
    for manifest in case.manifests:
        apply_once_its_runtime_is_seen(control_plane, namespace, manifest)

    eventually(
        lambda: _exists(control_plane, namespace, case.made),
        timeout=60,
        what=f"{case.operator} created {case.made[0]}/{case.made[1]}",
    )
    eventually(
        lambda: _running_on(gpu_nodes, _pods(k8s_client, namespace, case.pod_selector)),
        _count_running(case.pods),
        timeout=90,
        what=f"{case.pods} {case.operator} pods Running on kwok GPU nodes",
    )
