"""`kubectl scale` on a queued PyTorchJob, on the real control plane with training-operator.

The scale subresource writes the job's worker count (the CRD's specReplicasPath) through an
autoscaling/v1 Scale, which the job webhooks never saw: a plain user raised an admitted
PyTorchJob's workers from 1 to 3 and ran 16 GPUs on an 8-GPU admission. The scale webhook reads
the job and refuses the change while it is admitted; a waiting job may still be scaled.

The user is `alice`, impersonated by the admin, with a Role that lets her read and scale
PyTorchJobs in the test's namespace (the controller's identity is the only one let through).
"""

from __future__ import annotations

from typing import Any

import pytest

from e2e.harness import (
    WL,
    ControllerProcess,
    apply,
    controller,
    get,
    is_true,
    items,
    one_queue,
    wait_for,
)
from queuectl.api import names
from queuectl.testenv.cluster import Cluster
from queuectl.testenv.pytest_plugin import StandardFleet

__all__ = ["controller"]

pytestmark = [pytest.mark.operator("training-operator")]
USER = "alice"


@pytest.fixture(scope="module", autouse=True)
def _operators(operators: Any) -> None:
    """Before the module's controller starts, so it watches PyTorchJobs from its start."""
    operators("training-operator")


def pytorch_job(name: str, ns: str) -> dict[str, Any]:
    """A master and one worker of 4 GPUs each: 8 GPUs. The container is named `pytorch`, where
    the operator looks for the rendezvous port."""
    gpus = {names.GPU_RESOURCE: "4"}
    template = {
        "spec": {
            "terminationGracePeriodSeconds": 0,
            "containers": [
                {
                    "name": "pytorch",
                    "image": "registry.k8s.io/pause:3.10",
                    "resources": {"requests": gpus, "limits": gpus},
                }
            ],
        }
    }
    replica = {"replicas": 1, "restartPolicy": "OnFailure", "template": template}
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": name, "namespace": ns, "labels": {names.LABEL_QUEUE_NAME: "lq"}},
        "spec": {"pytorchReplicaSpecs": {"Master": replica, "Worker": replica}},
    }


def scaler(ns: str) -> list[dict[str, Any]]:
    """An edit-like Role for `USER`: read PyTorchJobs and write their scale subresource."""
    rbac = "rbac.authorization.k8s.io/v1"
    role = {
        "apiVersion": rbac,
        "kind": "Role",
        "metadata": {"name": "scaler", "namespace": ns},
        "rules": [
            {
                "apiGroups": ["kubeflow.org"],
                "resources": ["pytorchjobs", "pytorchjobs/scale"],
                "verbs": ["get", "list", "watch", "update", "patch"],
            }
        ],
    }
    binding = {
        "apiVersion": rbac,
        "kind": "RoleBinding",
        "metadata": {"name": "scaler", "namespace": ns},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "scaler"},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": USER}],
    }
    return [role, binding]


def workload_of(c: Cluster, ns: str, job: str) -> dict[str, Any] | None:
    for wl in items(c, WL, ns):
        refs = wl["metadata"].get("ownerReferences") or []
        if any(r.get("kind") == "PyTorchJob" and r.get("name") == job for r in refs):
            return wl
    return None


def workers(c: Cluster, ns: str, job: str) -> int:
    spec = get(c, "pytorchjob", job, ns)["spec"]["pytorchReplicaSpecs"]
    return int(spec["Worker"]["replicas"])


def test_an_admitted_pytorchjob_cannot_be_scaled_but_a_waiting_one_can(
    control_plane: Cluster, namespace: str, gpu_nodes: StandardFleet, controller: ControllerProcess
) -> None:
    c, ns = control_plane, namespace
    one_queue(c, ns, 8)
    apply(c, *scaler(ns))
    apply(c, pytorch_job("train", ns))
    wait_for(
        "train admitted", lambda: is_true(workload_of(c, ns, "train"), names.COND_ADMITTED), 90
    )

    scale = ["scale", "pytorchjob", "-n", ns, f"--as={USER}", "--replicas=3"]
    refused = c.kubectl(*scale, "train", check=False)
    assert refused.returncode != 0, "scaled from 1 to 3 workers while admitted: 16 GPUs on 8"
    assert "PyTorchJob" in refused.stderr and "while it is admitted" in refused.stderr
    assert "delete it and create it again" in refused.stderr, refused.stderr
    assert workers(c, ns, "train") == 1

    # A second job waits behind the first (the queue's 8 GPUs are taken): it may be scaled.
    apply(c, pytorch_job("later", ns))
    wait_for("later's Workload", lambda: workload_of(c, ns, "later"), 60)
    assert not is_true(workload_of(c, ns, "later"), names.COND_ADMITTED)
    c.kubectl(*scale, "later")
    assert workers(c, ns, "later") == 3

    # A job that does not exist is answered 404 by the API server before any webhook is
    # called: the scale webhook's refusal of a job it cannot read never meets this case.
    ghost = c.kubectl(*scale, "ghost", check=False)
    assert ghost.returncode != 0 and "not found" in ghost.stderr.lower(), ghost.stderr
    assert "queuectl" not in ghost.stderr, ghost.stderr
