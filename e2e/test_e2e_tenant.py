"""What a tenant sees, on the real control plane with the real authorizer: the user roles
(kustomize base `rbac/user_roles.yaml`) let a namespace user read their LocalQueue, with their
ClusterQueue's quota in its status (`kubectl get localqueue -o wide`), and nothing more; a batch
admin runs the queue setup; the built-in `view` and `admin` roles pick the queue roles up."""

from __future__ import annotations

from pathlib import Path

import pytest

from e2e.harness import ControllerProcess, apply, gpu_job, one_queue, running_pods, wait_for
from queuectl.testenv import eventually
from queuectl.testenv.cluster import Cluster
from queuectl.testenv.pytest_plugin import StandardFleet

ROLES = Path(__file__).parent.parent / "deploy" / "kustomize" / "base" / "rbac" / "user_roles.yaml"


def can(cluster: Cluster, user: str, verb: str, what: str, namespace: str | None = None) -> bool:
    args = ["auth", "can-i", verb, what, f"--as={user}"]
    args += ["-n", namespace] if namespace else []
    return cluster.kubectl(*args, check=False).stdout.strip() == "yes"


def bind(cluster: Cluster, name: str, role: str, user: str, namespace: str | None = None) -> None:
    if namespace is None:
        cluster.kubectl(
            "create", "clusterrolebinding", name, f"--clusterrole={role}", f"--user={user}"
        )
    else:
        cluster.kubectl(
            "create",
            "rolebinding",
            name,
            f"--clusterrole={role}",
            f"--user={user}",
            "-n",
            namespace,
        )


@pytest.fixture(scope="module")
def roles(control_plane: Cluster) -> None:
    control_plane.kubectl("apply", "-f", str(ROLES))


def test_a_namespace_user_reads_their_queue_and_its_quota_and_nothing_else(
    control_plane: Cluster,
    controller: ControllerProcess,
    gpu_nodes: StandardFleet,
    roles: None,
    namespace: str,
) -> None:
    user = f"alice-{namespace}"
    bind(control_plane, "alice", "queuectl-batch-user", user, namespace)
    one_queue(control_plane, namespace, 16)
    apply(control_plane, gpu_job("train", namespace, "lq"))
    wait_for("train running", lambda: running_pods(control_plane, namespace, "train"))

    assert can(control_plane, user, "get", "localqueues.queuectl.io", namespace)
    assert can(control_plane, user, "list", "workloads.queuectl.io", namespace)
    assert not can(control_plane, user, "get", "localqueues.queuectl.io", "default")
    assert not can(control_plane, user, "get", "clusterqueues.queuectl.io")
    assert not can(control_plane, user, "patch", "workloads.queuectl.io/status", namespace)
    assert not can(control_plane, user, "create", "localqueues.queuectl.io", namespace)

    # What `kubectl get localqueue -o wide` shows them (the status is refreshed every few s).
    wide = eventually(
        lambda: (
            control_plane.kubectl(
                "get", "localqueue", "lq", "-n", namespace, "-o", "wide", f"--as={user}"
            ).stdout
        ),
        lambda out: "8/16 used, +0 borrowable, 0 pending" in out,
        timeout=60,
        what="the LocalQueue's GPUs column",
    )
    assert "GPUS" in wide.splitlines()[0]


def test_a_batch_admin_runs_the_queue_setup_but_not_the_controllers_status(
    control_plane: Cluster, roles: None, namespace: str
) -> None:
    user = f"bob-{namespace}"
    bind(control_plane, f"bob-{namespace}", "queuectl-batch-admin", user)
    for what in ("clusterqueues", "cohorts", "resourceflavors", "workloadpriorityclasses"):
        assert can(control_plane, user, "create", f"{what}.queuectl.io")
    assert can(control_plane, user, "create", "localqueues.queuectl.io", namespace)
    assert can(control_plane, user, "delete", "workloads.queuectl.io", namespace)
    assert not can(control_plane, user, "patch", "workloads.queuectl.io/status", namespace)
    assert not can(control_plane, user, "create", "workloads.queuectl.io", namespace)


def test_the_built_in_view_and_admin_roles_include_the_queue_roles(
    control_plane: Cluster, roles: None, namespace: str
) -> None:
    viewer, admin = f"carol-{namespace}", f"dave-{namespace}"
    bind(control_plane, "carol", "view", viewer, namespace)
    bind(control_plane, "dave", "admin", admin, namespace)
    eventually(  # the aggregation controller folds our roles in
        lambda: (
            can(control_plane, viewer, "list", "localqueues.queuectl.io", namespace)
            and can(control_plane, admin, "create", "localqueues.queuectl.io", namespace)
        ),
        timeout=60,
        what="view and admin aggregating the queue roles",
    )
    assert not can(control_plane, viewer, "create", "localqueues.queuectl.io", namespace)
    assert not can(control_plane, admin, "create", "clusterqueues.queuectl.io")
    assert not can(control_plane, admin, "patch", "workloads.queuectl.io/status", namespace)
