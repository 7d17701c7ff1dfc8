"""The job kinds the bypass fuzzer attacks, each as the objects of its world.

Every case makes an admitted object `a` that fills the 8-GPU ClusterQueue (two pods of 4 GPUs,
plus whatever non-GPU pods the kind adds) and a queued object `b` of one 4-GPU pod that waits
behind it. Only the API paths and bodies differ; the fuzzer finds children and pods itself.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from queuectl.api import names

Obj = dict[str, Any]
PAUSE = "registry.k8s.io/pause:3.10"
GPUS_PER_POD = 4
RUNTIME = "bypass-torch"
BIG_RUNTIME = "bypass-torch-big"  # a runtimeRef a user might swap in: four nodes, not one


def container(name: str = "main", gpus: int = GPUS_PER_POD, cpu: str | None = None) -> Obj:
    requests: dict[str, str] = {}
    if gpus:
        requests[names.GPU_RESOURCE] = str(gpus)
    if cpu:
        requests["cpu"] = cpu
    return {
        "name": name,
        "image": PAUSE,
        "resources": {"requests": dict(requests), "limits": dict(requests)},
    }


def pod_template(gpus: int = GPUS_PER_POD, name: str = "main", cpu: str | None = None) -> Obj:
    return {
        "metadata": {"annotations": {}},
        "spec": {
            "restartPolicy": "Never",
            "terminationGracePeriodSeconds": 0,
            "containers": [container(name, gpus, cpu)],
        },
    }


def _meta(name: str, namespace: str, queue: str) -> Obj:
    return {"name": name, "namespace": namespace, "labels": {names.LABEL_QUEUE_NAME: queue}}


@dataclass(frozen=True)
class KindCase:
    name: str
    """As the report names it."""
    collection: str
    """The collection path, `{ns}` for the namespace."""
    make: Callable[[str, str, str, int], list[Obj]]
    """(name, namespace, queue, GPU pods) -> the objects to create (pods, for a pod group)."""
    owner_kind: str | None
    """The kind of the Workload's owner (None: a pod group, found by its group label)."""
    operators: tuple[str, ...] = ()
    gpu_pods: int = 2
    """GPU pods of `a` once admitted (what fills the queue)."""
    after_admitted: Callable[[str, str, str, int], list[Obj]] | None = None
    """Objects made once `a` runs (same arguments as `make`); refused ones are left out."""

    def path(self, namespace: str) -> str:
        return self.collection.format(ns=namespace)


def _job(name: str, ns: str, queue: str, pods: int) -> list[Obj]:
    return [
        {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": _meta(name, ns, queue),
            "spec": {
                "parallelism": pods,
                "completions": pods,
                "backoffLimit": 10,
                "template": pod_template(),
            },
        }
    ]


def _jobset(name: str, ns: str, queue: str, pods: int) -> list[Obj]:
    job = {"parallelism": 1, "completions": 1, "backoffLimit": 10, "template": pod_template()}
    return [
        {
            "apiVersion": "jobset.x-k8s.io/v1alpha2",
            "kind": "JobSet",
            "metadata": _meta(name, ns, queue),
            "spec": {
                "replicatedJobs": [{"name": "workers", "replicas": pods, "template": {"spec": job}}]
            },
        }
    ]


def _ray_cluster_spec(pods: int) -> Obj:
    head = pod_template(gpus=0, cpu="1")
    worker = pod_template()
    for t in (head, worker):
        del t["spec"]["restartPolicy"]
    return {
        "headGroupSpec": {"rayStartParams": {}, "template": head},
        "workerGroupSpecs": [
            {
                "groupName": "gpu",
                "replicas": pods,
                "minReplicas": 0,
                "maxReplicas": pods,
                "rayStartParams": {},
                "template": worker,
            }
        ],
    }


def _raycluster(name: str, ns: str, queue: str, pods: int) -> list[Obj]:
    return [
        {
            "apiVersion": "ray.io/v1",
            "kind": "RayCluster",
            "metadata": _meta(name, ns, queue),
            "spec": _ray_cluster_spec(pods),
        }
    ]


def _rayjob(name: str, ns: str, queue: str, pods: int) -> list[Obj]:
    return [
        {
            "apiVersion": "ray.io/v1",
            "kind": "RayJob",
            "metadata": _meta(name, ns, queue),
            "spec": {
                "entrypoint": "python -c 'print(1)'",
                "shutdownAfterJobFinishes": True,
                "rayClusterSpec": _ray_cluster_spec(pods),
            },
        }
    ]


def _pytorch(name: str, ns: str, queue: str, pods: int) -> list[Obj]:
    template = pod_template(name="pytorch")
    del template["spec"]["restartPolicy"]
    # OnFailure: a pod deleted (the fuzzer deletes one after a template change) is made again;
    # with Never the operator fails the whole job.
    specs: Obj = {"Master": {"replicas": 1, "restartPolicy": "OnFailure", "template": template}}
    if pods > 1:
        specs["Worker"] = {
            "replicas": pods - 1,
            "restartPolicy": "OnFailure",
            "template": copy.deepcopy(template),
        }
    return [
        {
            "apiVersion": "kubeflow.org/v1",
            "kind": "PyTorchJob",
            "metadata": _meta(name, ns, queue),
            "spec": {"pytorchReplicaSpecs": specs},
        }
    ]


def _mpijob(name: str, ns: str, queue: str, pods: int) -> list[Obj]:
    """A launcher (CPU only; its Job is made by mpi-operator while the MPIJob waits) and
    `pods` GPU workers, shaped like mpi-operator's examples/v2beta1/pi."""
    launcher = pod_template(gpus=0, name="mpi-launcher", cpu="1")
    worker = pod_template(name="mpi-worker")
    for t in (launcher, worker):
        del t["spec"]["restartPolicy"]
    # OnFailure: a worker deleted (the fuzzer deletes one after a template change) is made
    # again, as for PyTorchJob.
    return [
        {
            "apiVersion": "kubeflow.org/v2beta1",
            "kind": "MPIJob",
            "metadata": _meta(name, ns, queue),
            "spec": {
                "slotsPerWorker": 1,
                "runPolicy": {"cleanPodPolicy": "Running"},
                "mpiReplicaSpecs": {
                    "Launcher": {"replicas": 1, "restartPolicy": "OnFailure", "template": launcher},
                    "Worker": {"replicas": pods, "restartPolicy": "OnFailure", "template": worker},
                },
            },
        }
    ]


def _trainjob(name: str, ns: str, queue: str, pods: int) -> list[Obj]:
    gpus = {names.GPU_RESOURCE: str(GPUS_PER_POD)}
    return [
        {
            "apiVersion": "trainer.kubeflow.org/v1alpha1",
            "kind": "TrainJob",
            "metadata": _meta(name, ns, queue),
            "spec": {
                "runtimeRef": {"name": RUNTIME},
                "trainer": {
                    "numNodes": pods,
                    "resourcesPerNode": {"requests": gpus, "limits": gpus},
                },
            },
        }
    ]


def runtime(name: str, num_nodes: int) -> Obj:
    """A ClusterTrainingRuntime shaped like trainer's torch-distributed, on the pause image."""
    job = {"backoffLimit": 10, "template": pod_template(gpus=0, name="node")}
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "ClusterTrainingRuntime",
        "metadata": {"name": name},
        "spec": {
            "mlPolicy": {"numNodes": num_nodes, "torch": {"numProcPerNode": "auto"}},
            "template": {
                "spec": {
                    "replicatedJobs": [
                        {
                            "name": "node",
                            "template": {
                                "metadata": {
                                    "labels": {
                                        "trainer.kubeflow.org/trainjob-ancestor-step": "trainer"
                                    }
                                },
                                "spec": job,
                            },
                        }
                    ]
                }
            },
        },
    }


def _pod_group(name: str, ns: str, queue: str, pods: int) -> list[Obj]:
    """`pods` pods of one group."""
    out = []
    for i in range(pods):
        template = pod_template()
        out.append(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {
                    **_meta(f"{name}-{i}", ns, queue),
                    "labels": {names.LABEL_QUEUE_NAME: queue, names.LABEL_POD_GROUP_NAME: name},
                    "annotations": {names.ANNOTATION_POD_GROUP_TOTAL_COUNT: str(pods)},
                },
                "spec": template["spec"],
            }
        )
    return out


def _spare_pod(name: str, ns: str, queue: str, pods: int) -> list[Obj]:
    """One pod more in the admitted group, made once it runs: a replacement in waiting, gated
    while the group's admission is held by its running pods."""
    spare = _pod_group(name, ns, queue, pods + 1)[-1]
    spare["metadata"]["annotations"][names.ANNOTATION_POD_GROUP_TOTAL_COUNT] = str(pods)
    return [spare]


def _lws(name: str, ns: str, queue: str, pods: int) -> list[Obj]:
    leader = pod_template(name="leader")
    worker = pod_template(name="worker")
    for t in (leader, worker):
        del t["spec"]["restartPolicy"]
    return [
        {
            "apiVersion": "leaderworkerset.x-k8s.io/v1",
            "kind": "LeaderWorkerSet",
            "metadata": _meta(name, ns, queue),
            "spec": {
                "replicas": 1,
                "leaderWorkerTemplate": {
                    "size": pods,
                    "leaderTemplate": leader,
                    "workerTemplate": worker,
                },
            },
        }
    ]


CASES: dict[str, KindCase] = {
    c.name: c
    for c in (
        KindCase("Job", "/apis/batch/v1/namespaces/{ns}/jobs", _job, "Job"),
        KindCase(
            "JobSet",
            "/apis/jobset.x-k8s.io/v1alpha2/namespaces/{ns}/jobsets",
            _jobset,
            "JobSet",
            ("jobset",),
        ),
        KindCase("RayJob", "/apis/ray.io/v1/namespaces/{ns}/rayjobs", _rayjob, "RayJob", ("ray",)),
        KindCase(
            "RayCluster",
            "/apis/ray.io/v1/namespaces/{ns}/rayclusters",
            _raycluster,
            "RayCluster",
            ("ray",),
        ),
        KindCase(
            "PyTorchJob",
            "/apis/kubeflow.org/v1/namespaces/{ns}/pytorchjobs",
            _pytorch,
            "PyTorchJob",
            ("training-operator",),
        ),
        KindCase(
            "MPIJob",
            "/apis/kubeflow.org/v2beta1/namespaces/{ns}/mpijobs",
            _mpijob,
            "MPIJob",
            ("mpi-operator",),
        ),
        KindCase(
            "TrainJob",
            "/apis/trainer.kubeflow.org/v1alpha1/namespaces/{ns}/trainjobs",
            _trainjob,
            "TrainJob",
            ("jobset", "trainer"),
        ),
        KindCase(
            "PodGroup", "/api/v1/namespaces/{ns}/pods", _pod_group, None, after_admitted=_spare_pod
        ),
        KindCase(
            "LeaderWorkerSet",
            "/apis/leaderworkerset.x-k8s.io/v1/namespaces/{ns}/leaderworkersets",
            _lws,
            "LeaderWorkerSet",
            ("lws",),
        ),
    )
}
