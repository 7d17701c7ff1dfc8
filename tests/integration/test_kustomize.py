"""The real API server accepts every object the kustomize base and overlay render.

Each variant is rendered with `kubectl kustomize` and applied with server-side dry run, which runs
the whole write path (defaulting, schema and strict field validation, admission, Pod Security)
without persisting anything: the webhook configurations, whose Fail policy would block Jobs
cluster-wide without a controller behind them, never take effect. Only queuectl's namespace is
really created, since dry-run of a namespaced object needs its namespace to exist.

cert-manager's CRDs are not part of the control plane, so the overlay test installs stub CRDs for
Issuer and Certificate whose schemas hold just the fields the overlay uses (no unknown fields
preserved): strict field validation then still catches a misspelt field. The stubs are removed
afterwards.
"""

from __future__ import annotations

import copy
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from queuectl.api import names
from queuectl.testenv.cluster import Cluster, find_kubectl

REPO = Path(__file__).resolve().parents[2]
BASE = REPO / "deploy" / "kustomize" / "base"
CERT_MANAGER = REPO / "deploy" / "kustomize" / "overlays" / "cert-manager"
FIELD_MANAGER = "queuectl-deploy-test"

Obj = dict[str, Any]


def render(path: Path) -> str:
    done = subprocess.run(
        [find_kubectl(), "kustomize", str(path)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, f"kubectl kustomize {path}:\n{done.stderr}"
    return done.stdout


def objects(manifest: str) -> list[Obj]:
    return [doc for doc in yaml.safe_load_all(manifest) if doc]


def ensure_system_namespace(cluster: Cluster) -> None:
    """Create queuectl-system if absent; left in place, as other tests may use it too."""
    if cluster.kubectl("get", "namespace", names.SYSTEM_NAMESPACE, check=False).returncode != 0:
        cluster.kubectl("create", "namespace", names.SYSTEM_NAMESPACE, check=False)
    cluster.kubectl("get", "namespace", names.SYSTEM_NAMESPACE)


def dry_run_apply(cluster: Cluster, manifest: str) -> list[str]:
    """Server-side apply in dry-run mode; the lines kubectl reports, one per accepted object."""
    done = cluster.kubectl(
        "apply",
        "--server-side",
        "--dry-run=server",
        "--force-conflicts",  # others' field managers may own identical CRDs: not our concern
        f"--field-manager={FIELD_MANAGER}",
        "--validate=strict",
        "-f",
        "-",
        input=manifest,
        check=False,
    )
    assert done.returncode == 0, f"the API server refused the manifest:\n{done.stderr}"
    return [line for line in done.stdout.splitlines() if line.strip()]


def assert_each_object_accepted(rendered: list[Obj], report: list[str]) -> None:
    assert len(report) == len(rendered), "\n".join(report)
    for line in report:
        assert line.endswith("serverside-applied (server dry run)"), line
    reported_names = {line.split()[0].split("/", 1)[1] for line in report}
    assert reported_names == {o["metadata"]["name"] for o in rendered}


def test_the_api_server_accepts_every_object_of_the_base(control_plane: Cluster) -> None:
    manifest = render(BASE)
    ensure_system_namespace(control_plane)
    assert_each_object_accepted(objects(manifest), dry_run_apply(control_plane, manifest))


def _stub_crd(kind: str, plural: str, spec_schema: Obj) -> Obj:
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.cert-manager.io"},
        "spec": {
            "group": "cert-manager.io",
            "scope": "Namespaced",
            "names": {"kind": kind, "plural": plural, "singular": kind.lower(),
                      "listKind": f"{kind}List"},
            "versions": [{
                "name": "v1",
                "served": True,
                "storage": True,
                "schema": {"openAPIV3Schema": {
                    "type": "object",
                    "properties": {"spec": spec_schema},
                }},
            }],
        },
    }  # fmt: skip


STR: Obj = {"type": "string"}
# Only the fields queuectl's overlay uses, with cert-manager v1's names and types.
CERT_MANAGER_STUBS = [
    _stub_crd("Issuer", "issuers", {
        "type": "object",
        "properties": {"selfSigned": {
            "type": "object",
            "properties": {"crlDistributionPoints": {"type": "array", "items": STR}},
        }},
    }),
    _stub_crd("Certificate", "certificates", {
        "type": "object",
        "required": ["secretName", "issuerRef"],
        "properties": {
            "secretName": STR,
            "commonName": STR,
            "dnsNames": {"type": "array", "items": STR},
            "duration": STR,
            "renewBefore": STR,
            "privateKey": {"type": "object", "properties": {
                "algorithm": {"type": "string", "enum": ["RSA", "ECDSA", "Ed25519"]},
                "size": {"type": "integer"},
                "rotationPolicy": {"type": "string", "enum": ["Never", "Always"]},
                "encoding": {"type": "string", "enum": ["PKCS1", "PKCS8"]},
            }},
            "issuerRef": {"type": "object", "required": ["name"], "properties": {
                "name": STR, "kind": STR, "group": STR,
            }},
        },
    }),
]  # fmt: skip


@pytest.fixture
def cert_manager_stubs(control_plane: Cluster) -> Iterator[None]:
    manifest = yaml.safe_dump_all(CERT_MANAGER_STUBS)
    control_plane.kubectl("apply", "--server-side", f"--field-manager={FIELD_MANAGER}",
                          "-f", "-", input=manifest)  # fmt: skip
    names_ = [crd["metadata"]["name"] for crd in CERT_MANAGER_STUBS]
    try:
        control_plane.kubectl(
            "wait", "--for=condition=Established", "--timeout=60s",
            *[f"crd/{n}" for n in names_],
        )  # fmt: skip
        yield
    finally:
        control_plane.kubectl("delete", "--ignore-not-found", *[f"crd/{n}" for n in names_])


def test_the_api_server_accepts_every_object_of_the_cert_manager_overlay(
    control_plane: Cluster, cert_manager_stubs: None
) -> None:
    manifest = render(CERT_MANAGER)
    ensure_system_namespace(control_plane)
    assert_each_object_accepted(objects(manifest), dry_run_apply(control_plane, manifest))


@pytest.mark.parametrize("variant", [BASE, CERT_MANAGER], ids=["base", "cert-manager"])
def test_every_pod_meets_pod_security_restricted(
    control_plane: Cluster, namespace: str, variant: Path
) -> None:
    """A Pod from each workload's template is admitted where PSA enforces `restricted`, as the
    base's namespace does."""
    control_plane.kubectl(
        "label", "namespace", namespace,
        "pod-security.kubernetes.io/enforce=restricted",
        "pod-security.kubernetes.io/enforce-version=latest",
    )  # fmt: skip
    workloads = [o for o in objects(render(variant)) if o["kind"] in ("Deployment", "DaemonSet")]
    assert {o["kind"] for o in workloads} == {"Deployment", "DaemonSet"}
    for workload in workloads:
        template = copy.deepcopy(workload["spec"]["template"])
        template["spec"]["serviceAccountName"] = "default"  # theirs exist only in queuectl-system
        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": workload["metadata"]["name"], "namespace": namespace,
                         "labels": template["metadata"]["labels"]},
            "spec": template["spec"],
        }  # fmt: skip
        done = control_plane.kubectl(
            "create", "--dry-run=server", "-f", "-", input=yaml.safe_dump(pod), check=False
        )
        where = f"{workload['kind']}/{workload['metadata']['name']}"
        assert done.returncode == 0, f"{where}: {done.stderr}"
        assert "Warning" not in done.stderr, f"{where}: {done.stderr}"
