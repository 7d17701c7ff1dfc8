"""queuectl installed outside queuectl-system: the webhooks trust the controller's own identity.

The controller runs as a real ServiceAccount token of another namespace (as it would in-cluster,
no impersonation), told only `--namespace`. Its writes to queued Jobs must pass the Job webhook,
which it configured itself, so a Job is admitted and started.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from e2e.harness import (
    ControllerProcess,
    admitted,
    apply,
    get,
    gpu_job,
    one_queue,
    unregister_webhooks,
    wait_for,
)
from queuectl.api import names
from queuectl.testenv.cluster import Cluster
from queuectl.testenv.pytest_plugin import StandardFleet

INSTALL_NS = "batch-system"
USER = f"system:serviceaccount:{INSTALL_NS}:{names.CONTROLLER_SERVICE_ACCOUNT}"


def service_account_kubeconfig(cluster: Cluster, path: Path) -> str:
    """The cluster's kubeconfig with its user replaced by a token of the controller's account."""
    cluster.kubectl("create", "namespace", INSTALL_NS, check=False)
    cluster.kubectl(
        "create", "serviceaccount", names.CONTROLLER_SERVICE_ACCOUNT, "-n", INSTALL_NS, check=False
    )
    # Broad rights keep this test about identity, not RBAC (test_kustomize covers the roles).
    cluster.kubectl(
        "create", "clusterrolebinding", f"queuectl-{INSTALL_NS}", "--clusterrole=cluster-admin",
        f"--serviceaccount={INSTALL_NS}:{names.CONTROLLER_SERVICE_ACCOUNT}", check=False,
    )  # fmt: skip
    token = cluster.kubectl(
        "create", "token", names.CONTROLLER_SERVICE_ACCOUNT, "-n", INSTALL_NS, "--duration=1h"
    ).stdout.strip()
    config = yaml.safe_load(Path(cluster.kubeconfig).read_text())
    for user in config["users"]:
        user["user"] = {"token": token}
    path.write_text(yaml.safe_dump(config))
    return str(path)


@pytest.fixture
def elsewhere(control_plane: Cluster, tmp_path: Path) -> Iterator[ControllerProcess]:
    kubeconfig = service_account_kubeconfig(control_plane, tmp_path / "sa.kubeconfig")
    proc = ControllerProcess(kubeconfig, tmp_path, ["--namespace", INSTALL_NS, "--no-impersonate"])
    try:
        proc.start()
        yield proc
    finally:
        proc.stop()
        unregister_webhooks(control_plane)
        control_plane.kubectl(
            "delete", "--ignore-not-found", f"clusterrolebinding/queuectl-{INSTALL_NS}"
        )


def test_a_controller_installed_elsewhere_may_start_the_jobs_it_admits(
    control_plane: Cluster, namespace: str, gpu_nodes: StandardFleet, elsewhere: ControllerProcess
) -> None:
    one_queue(control_plane, namespace, 8)
    apply(control_plane, gpu_job("train", namespace, "lq"))
    wait_for("train admitted", lambda: admitted(control_plane, namespace, "train"))
    wait_for(
        "train unsuspended by the controller",
        lambda: get(control_plane, "job", "train", namespace)["spec"].get("suspend") is False,
        timeout=30,
    )
    lease = get(control_plane, "lease", names.CONTROLLER_LEASE, INSTALL_NS)
    assert lease["spec"]["holderIdentity"]
