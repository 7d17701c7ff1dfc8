"""Kubeflow mpi-operator v0.6.0 (MPIJob, kubeflow.org/v2beta1) as a testenv operator.

Not a kubebuilder operator: a client-go controller with flags only, leader election that cannot
be switched off (its Lease goes in `--lock-namespace`, kube-system here, which exists), no
webhooks, and a health server on the fixed port 8080 of every address (a package variable, no
flag): two clusters on one machine cannot both run it, and a second start fails with "address
already in use". Its readiness is that /healthz.

training-operator v1.8.1 serves an MPIJob of its own (kubeflow.org/v1) under the same CRD name
`mpijobs.kubeflow.org`, so the testenv runs training-operator without its MPIJob scheme and
without that CRD (trainingoperator.TRAINING_OPERATOR_SCHEMES), as Kubeflow's docs say to when the
standalone mpi-operator runs beside it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Final

from queuectl.testenv.operatorargs import HOST, RunDir

HEALTH_PORT: Final = 8080
"""Fixed in its code (cmd/mpi-operator/app/server.go `healthCheckPort`)."""
LOCK_NAMESPACE: Final = "kube-system"


def argv(binary: Path, run: RunDir) -> list[str]:
    """mpi-operator as one process outside a cluster (operators.OPERATORS): it reads
    KUBECONFIG; metrics off (port 0); a client fast enough for the tests (its default is
    5 QPS)."""
    return [
        str(binary),
        f"--lock-namespace={LOCK_NAMESPACE}",
        "--monitoring-port=0",
        "--threadiness=2",
        "--kube-api-qps=50",
        "--kube-api-burst=100",
    ]


def health_url() -> str:
    return f"http://{HOST}:{HEALTH_PORT}/healthz"
