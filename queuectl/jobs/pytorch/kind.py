"""PyTorchJob (kubeflow.org/v1, training-operator v1.8.1) as a `JobKind`: the Master and the
Worker replica specs are pod sets (`master`, `worker`), spec.runPolicy.suspend holds it (the
operator deletes its pods and services and sets condition Suspended). Everything but where its
replica specs live is the Kubeflow kinds' shared base (`jobs/kubeflow.py`)."""

from __future__ import annotations

from typing import ClassVar, Final

from queuectl.api import names
from queuectl.api.resource import Resource
from queuectl.jobs import pinning
from queuectl.jobs.kubeflow import ReplicaSpecsKind

PYTORCH_JOBS: Final = Resource("kubeflow.org", "v1", "pytorchjobs", True, "PyTorchJob")


class PyTorchJob(ReplicaSpecsKind):
    """The `JobKind` for PyTorchJobs."""

    resource: Resource = PYTORCH_JOBS
    REPLICAS: ClassVar[tuple[str, ...]] = ("spec", "pytorchReplicaSpecs")
    ROLES: ClassVar[dict[str, str]] = {"master": "Master", "worker": "Worker"}
    WORKLOAD_PREFIX: ClassVar[str] = "pytorchjob"
    KIND_WORDS: ClassVar[str] = "PyTorchJob"
    INDEX: ClassVar[pinning.IndexSource | None] = pinning.IndexSource(
        names.LABEL_KUBEFLOW_REPLICA_INDEX
    )
    """The operator labels each pod with its index among its replica type's: a worker's rank
    order, so a sliced worker pod set is pinned pod by pod (docs/design/jobs.md, "Per-pod
    pins")."""
