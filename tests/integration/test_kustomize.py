"""The real API server accepts every object the kustomize base and overlay render.

Each variant is rendered with `kubectl kustomize` and applied with server-side dry run, which runs
the whole write path (defaulting, schema and strict field validation, admission, Pod Security)
without persisting anything: the webhook configurations, whose Fail policy would block Jobs
cluster-wide without a controller behind them, never take effect. Only queuectl's namespace is
really created, since dry-run of a namespaced object needs its namespace to exist.

The controller's RBAC objects (they grant only its service account) are really applied, judged by
the real authorizer with SubjectAccessReviews, and deleted afterwards.

cert-manager's CRDs are not part of the control plane, so the overlay test installs stub CRDs for
Issuer and Certificate whose schemas hold just the fields the overlay uses (no unknown fields
preserved): strict field validation then still catches a misspelt field. The stubs are removed
afterwards.
"""

from __future__ import annotations

import copy
import json
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
        "properties": {
            "selfSigned": {
                "type": "object",
                "properties": {"crlDistributionPoints": {"type": "array", "items": STR}},
            },
            "ca": {"type": "object", "required": ["secretName"], "properties": {
                "secretName": STR,
                "crlDistributionPoints": {"type": "array", "items": STR},
            }},
        },
    }),
    _stub_crd("Certificate", "certificates", {
        "type": "object",
        "required": ["secretName", "issuerRef"],
        "properties": {
            "secretName": STR,
            "isCA": {"type": "boolean"},
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


# --- the controller's RBAC, judged by the real authorizer --------------------------------------
CONTROLLER_USER = names.CONTROLLER_USERNAME
RBAC_KINDS = {"ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"}


def _controller_rbac(rendered: list[Obj]) -> list[Obj]:
    return [
        o
        for o in rendered
        if o["kind"] in RBAC_KINDS and o["metadata"]["name"] == names.CONTROLLER_SERVICE_ACCOUNT
    ]


@pytest.fixture
def controller_rbac(control_plane: Cluster) -> Iterator[None]:
    """The controller's ServiceAccount and roles, really applied (they grant only that account),
    and deleted afterwards."""
    ensure_system_namespace(control_plane)
    objs = _controller_rbac(objects(render(BASE)))
    assert len(objs) == len(RBAC_KINDS)
    control_plane.kubectl("apply", "--server-side", f"--field-manager={FIELD_MANAGER}",
                          "-f", "-", input=yaml.safe_dump_all(objs))  # fmt: skip
    try:
        yield
    finally:
        for o in objs:
            ns = ["-n", o["metadata"]["namespace"]] if "namespace" in o["metadata"] else []
            control_plane.kubectl("delete", "--ignore-not-found", o["kind"],
                                  o["metadata"]["name"], *ns, check=False)  # fmt: skip


def can_i(cluster: Cluster, verb: str, resource: str, namespace: str | None = None,
          name: str | None = None, subresource: str | None = None) -> bool:  # fmt: skip
    """Ask the API server's authorizer with a SubjectAccessReview (no discovery involved, so it
    works whether or not the CRDs are installed)."""
    plural, _, group = resource.partition(".")
    attributes = {"verb": verb, "group": group, "resource": plural}
    attributes |= {"namespace": namespace} if namespace else {}
    attributes |= {"name": name} if name else {}
    attributes |= {"subresource": subresource} if subresource else {}
    review = {
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SubjectAccessReview",
        "spec": {
            "user": CONTROLLER_USER,
            "groups": ["system:serviceaccounts", f"system:serviceaccounts:{SYSTEM_NS}",
                       "system:authenticated"],
            "resourceAttributes": attributes,
        },
    }  # fmt: skip
    done = cluster.kubectl("create", "-o", "json", "-f", "-", input=json.dumps(review))
    return bool(json.loads(done.stdout)["status"].get("allowed"))


def _resource(res: Any) -> str:
    return f"{res.plural}.{res.group}" if res.group else res.plural


def test_the_controller_may_list_and_watch_everything_it_caches(
    control_plane: Cluster, controller_rbac: None
) -> None:
    from queuectl.controller.watch.cache import WATCHED

    refused = [
        f"{verb} {_resource(res)}"
        for res in WATCHED
        for verb in ("list", "watch")
        if not can_i(control_plane, verb, _resource(res))
    ]
    assert not refused, f"the controller's cache would be refused: {refused}"


SYSTEM_NS = names.SYSTEM_NAMESPACE
WRITES_GRANTED = [
    ("create", "workloads.queuectl.io", "team-a", None, None),
    ("delete", "workloads.queuectl.io", "team-a", "wl", None),
    ("patch", "workloads.queuectl.io", "team-a", "wl", "status"),
    ("patch", "clusterqueues.queuectl.io", None, "cq", "status"),
    ("patch", "localqueues.queuectl.io", "team-a", "lq", "status"),
    ("patch", "jobs.batch", "team-a", "job", None),
    ("patch", "nodes", None, "gpu-1", None),
    ("patch", "pods", "team-a", "p", None),  # lift a pod group's admission gate
    ("delete", "pods", "team-a", "p", None),  # stop a preempted pod group; remove placeholders
    ("create", "pods", "team-a", None, None),  # the provisioning check's placeholders
    ("create", "events.events.k8s.io", "team-a", None, None),
    ("create", "leases.coordination.k8s.io", SYSTEM_NS, None, None),
    ("update", "leases.coordination.k8s.io", SYSTEM_NS, "queuectl-controller", None),
    ("create", "secrets", SYSTEM_NS, None, None),
    ("update", "secrets", SYSTEM_NS, names.WEBHOOK_CERT_SECRET, None),
    ("patch", "mutatingwebhookconfigurations.admissionregistration.k8s.io", None,
     names.MUTATING_WEBHOOK_CONFIGURATION, None),
    ("patch", "validatingwebhookconfigurations.admissionregistration.k8s.io", None,
     names.VALIDATING_WEBHOOK_CONFIGURATION, None),
]  # fmt: skip
WRITES_DENIED = [
    ("create", "jobs.batch", "team-a", None, None),
    ("update", "pods", "team-a", "p", None),  # placeholders and gated pods are never replaced
    ("get", "secrets", "team-a", "s", None),
    ("update", "clusterqueues.queuectl.io", None, "cq", None),
    ("patch", "mutatingwebhookconfigurations.admissionregistration.k8s.io", None, "other", None),
    ("update", "leases.coordination.k8s.io", "kube-system", "kube-scheduler", None),
    ("get", "secrets", SYSTEM_NS, "someone-elses-token", None),
    ("list", "secrets", SYSTEM_NS, None, None),
    ("update", "leases.coordination.k8s.io", SYSTEM_NS, "another-lease", None),
    ("delete", "nodes", None, "gpu-1", None),
]  # fmt: skip


def test_the_real_authorizer_grants_the_controllers_writes_and_nothing_more(
    control_plane: Cluster, controller_rbac: None
) -> None:
    wrong = [f"refused: {w}" for w in WRITES_GRANTED if not can_i(control_plane, *w)]
    wrong += [f"granted: {w}" for w in WRITES_DENIED if can_i(control_plane, *w)]
    assert not wrong
