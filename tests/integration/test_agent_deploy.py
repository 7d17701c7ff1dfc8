"""The agent's deployment on the real API server: every object is accepted, and its RBAC plus the
own-node admission policy let an agent change its own Node and nothing else."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
import yaml
from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

from queuectl.api import names
from queuectl.testenv import Cluster, eventually
from queuectl.testenv.cluster import find_kubectl

AGENT = Path(__file__).resolve().parents[2] / "deploy" / "kustomize" / "base" / "agent"
AGENT_USER = f"system:serviceaccount:{names.SYSTEM_NAMESPACE}:{names.AGENT_SERVICE_ACCOUNT}"
NODE_NAME_EXTRA = "authentication.kubernetes.io/node-name"
ENFORCED_KINDS = {
    "ServiceAccount",
    "ClusterRole",
    "ClusterRoleBinding",
    "ValidatingAdmissionPolicy",
    "ValidatingAdmissionPolicyBinding",
}


def rendered() -> list[dict[str, Any]]:
    done = subprocess.run(
        [find_kubectl(), "kustomize", str(AGENT)],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return [doc for doc in yaml.safe_load_all(done.stdout) if doc]


def apply(cluster: Cluster, objs: list[dict[str, Any]], *, dry_run: bool) -> str:
    args = ["apply", "--server-side", "--field-manager=queuectl-agent-test", "--validate=strict"]
    if dry_run:
        args.append("--dry-run=server")
    return cluster.kubectl(*args, "-f", "-", input=yaml.safe_dump_all(objs)).stdout


@pytest.fixture
def agent_rbac(control_plane: Cluster) -> Iterator[None]:
    """The agent's RBAC and own-node policy, really applied (they only match the agent's user);
    all of it is removed afterwards, so a later install (the Helm release) finds no cluster-scoped
    object it does not own."""
    if control_plane.kubectl("get", "namespace", names.SYSTEM_NAMESPACE, check=False).returncode:
        control_plane.kubectl("create", "namespace", names.SYSTEM_NAMESPACE, check=False)
    objs = [o for o in rendered() if o["kind"] in ENFORCED_KINDS]
    apply(control_plane, objs, dry_run=False)
    yield
    control_plane.kubectl(
        "delete", "--ignore-not-found", "-f", "-", input=yaml.safe_dump_all(objs), check=False
    )


def as_agent(cluster: Cluster, node: str | None) -> k8s.CoreV1Api:
    api = cluster.api_client()
    api.set_default_header(  # type: ignore[no-untyped-call]
        "Impersonate-User", AGENT_USER
    )
    api.set_default_header(  # type: ignore[no-untyped-call]
        "Impersonate-Group", "system:serviceaccounts"
    )
    if node is not None:
        api.set_default_header(  # type: ignore[no-untyped-call]
            f"Impersonate-Extra-{quote(NODE_NAME_EXTRA, safe='')}", node
        )
    return k8s.CoreV1Api(api)


def label(api: k8s.CoreV1Api, node: str) -> int:
    """Patch a label as the agent would; the HTTP status (200, or the refusal's)."""
    body = {"metadata": {"labels": {names.LABEL_GPU_HEALTHY_COUNT: str(int(time.time()) % 8)}}}
    try:
        api.patch_node(node, body)
    except ApiException as exc:
        return int(exc.status)
    return 200


def test_the_api_server_accepts_every_agent_object(control_plane: Cluster) -> None:
    if control_plane.kubectl("get", "namespace", names.SYSTEM_NAMESPACE, check=False).returncode:
        control_plane.kubectl("create", "namespace", names.SYSTEM_NAMESPACE, check=False)
    objs = rendered()
    out = apply(control_plane, objs, dry_run=True)
    assert out.count("serverside-applied (server dry run)") == len(objs) == 7, out


def test_an_agent_may_change_its_own_node_and_no_other(
    control_plane: Cluster, agent_rbac: None
) -> None:
    own, other = control_plane.add_gpu_nodes(2, name_prefix=f"own{int(time.time()) % 100000}")
    # The policy takes effect once the API server has loaded it.
    eventually(
        lambda: label(as_agent(control_plane, own.name), other.name),
        lambda s: s == 403,
        timeout=30,
        what="the own-node policy denies another node",
    )
    assert label(as_agent(control_plane, own.name), own.name) == 200
    status_patch = {
        "status": {
            "conditions": [
                {
                    "type": names.NODE_CONDITION_GPU_HEALTHY,
                    "status": "True",
                    "reason": "AllGPUsHealthy",
                }
            ]
        }
    }
    as_agent(control_plane, own.name).patch_node_status(own.name, status_patch)
    with pytest.raises(ApiException) as refused:
        as_agent(control_plane, own.name).patch_node_status(other.name, status_patch)
    assert refused.value.status == 403
    assert label(as_agent(control_plane, None), own.name) == 403  # a token not bound to a node
    with pytest.raises(ApiException) as rbac:
        as_agent(control_plane, own.name).delete_node(own.name)
    assert rbac.value.status == 403
    with pytest.raises(ApiException) as pods:
        as_agent(control_plane, own.name).list_namespaced_pod("default")
    assert pods.value.status == 403
