"""Kubeflow training-operator v1.8.1 (TFJob, PyTorchJob, ...) as a testenv operator.

A kubebuilder operator with flags only and a cert rotator that cannot be switched off: it fills
an existing Secret and then waits for the files a kubelet would mount from it. `create_secret`
gives it that Secret before the start, `mount_secret` plays the kubelet once it runs.
"""

from __future__ import annotations

import base64
from pathlib import Path

from kubernetes import client as k8s

from queuectl.testenv.cluster import Cluster
from queuectl.testenv.operatorargs import HOST, RunDir
from queuectl.testenv.waiting import eventually

TRAINING_OPERATOR_NAMESPACE = "kubeflow"
TRAINING_OPERATOR_SCHEMES = ("tfjob", "pytorchjob", "mxjob", "xgboostjob", "paddlejob")
"""Every kind it serves but MPIJob: mpi-operator serves that (v2beta1) under the same CRD name."""
TRAINING_OPERATOR_SECRET = "training-operator-webhook-cert"


def argv(binary: Path, run: RunDir) -> list[str]:
    return [
        str(binary),
        "--leader-elect=false",
        "--metrics-bind-address=0",
        f"--health-probe-bind-address={HOST}:{run.health_port}",
        f"--webhook-server-port={run.webhook_port}",
        "--zap-devel=false",
        *(f"--enable-scheme={scheme}" for scheme in TRAINING_OPERATOR_SCHEMES),
    ]


TRAINING_OPERATOR_CERT_DIR = Path("/tmp/k8s-webhook-server/serving-certs")  # fixed in its code


def mount_secret(cluster: Cluster, timeout: float = 60) -> None:
    """Its rotator fills the Secret and then waits for the files a kubelet would mount from
    it into its cert dir; write them there, as that mount would."""
    with cluster.api_client() as api:
        core = k8s.CoreV1Api(api)

        def data() -> dict[str, str]:
            secret = core.read_namespaced_secret(
                TRAINING_OPERATOR_SECRET, TRAINING_OPERATOR_NAMESPACE
            )
            return {k: str(v) for k, v in (secret.data or {}).items()}

        found = eventually(
            data, lambda d: "tls.crt" in d and "tls.key" in d, timeout=timeout, what="its cert"
        )
    TRAINING_OPERATOR_CERT_DIR.mkdir(parents=True, exist_ok=True)
    for key, value in found.items():
        target = TRAINING_OPERATOR_CERT_DIR / key
        target.touch(mode=0o600)
        target.write_bytes(base64.b64decode(value))


def create_secret(cluster: Cluster) -> None:
    """Its cert rotator cannot be switched off and only fills an existing Secret."""
    manifest = {
        "apiVersion": "v1",
        "kind": "List",
        "items": [
            {
                "apiVersion": "v1",
                "kind": "Namespace",
                "metadata": {"name": TRAINING_OPERATOR_NAMESPACE},
            },
            {
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": {
                    "name": TRAINING_OPERATOR_SECRET,
                    "namespace": TRAINING_OPERATOR_NAMESPACE,
                },
            },
        ],
    }
    cluster.apply_server_side(manifest)
