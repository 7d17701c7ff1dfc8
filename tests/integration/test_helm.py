"""The Helm chart, rendered by a real `helm` and installed on the real API server.

The chart is generated from the kustomize base (deploy/helm/generate.py); here a real Helm
(built from its Go module, testenv's `helm` fixture) shows that
- default values render exactly what kustomize renders (base, and the cert-manager overlay);
- the values a platform engineer sets land where they should, and bad values are refused;
- the API server accepts every rendered object (server-side dry run, strict validation);
- `helm install` creates the objects in the release namespace, and `helm uninstall` removes
  every webhook configuration, so no Fail-policy webhook is left to block the cluster.
Each of these runs with Helm v3 (v3.19.0) and Helm v4 (v4.0.0).

The controller pods never serve here (no image on kwok nodes), so while the release is installed
its Fail-policy webhooks would refuse labelled Jobs and queuectl resources cluster-wide: the
install test keeps that window short and always uninstalls.
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from test_kustomize import (  # the cert-manager stub CRDs and the dry-run helpers
    BASE,
    CERT_MANAGER,
    assert_each_object_accepted,
    cert_manager_stubs,
    dry_run_apply,
    objects,
    render,
)

from queuectl.testenv.cluster import Cluster

REPO = Path(__file__).resolve().parents[2]
CHART = REPO / "deploy" / "helm" / "queuectl"
RELEASE = "queuectl"
SYSTEM_NS = "queuectl-system"
HELM_LABELS = ("helm.sh/chart", "app.kubernetes.io/managed-by", "app.kubernetes.io/instance")
DIGEST = "sha256:" + "ab" * 32
CA_BUNDLE = base64.b64encode(b"-----BEGIN CERTIFICATE-----\nstand-in\n").decode()
WEBHOOK_KINDS = ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration")

Obj = dict[str, Any]
__all__ = ["cert_manager_stubs"]  # a fixture, used by name


@pytest.fixture(params=["v3", "v4"], ids=["helm-v3", "helm-v4"])
def run_helm(
    helm: Path, helm4: Path, request: pytest.FixtureRequest, tmp_path: Path
) -> Callable[..., subprocess.CompletedProcess[str]]:
    """`helm ARGS` with its cache, config and data kept in the test's temp dir; every test runs
    with Helm v3 and with Helm v4 (both built from their Go modules)."""
    binary = helm if request.param == "v3" else helm4
    env = dict(os.environ)
    for var in ("HELM_CACHE_HOME", "HELM_CONFIG_HOME", "HELM_DATA_HOME"):
        env[var] = str(tmp_path / var.lower())

    def run(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            [str(binary), *args], capture_output=True, text=True, timeout=300, env=env, check=False
        )
        if check:
            assert done.returncode == 0, f"helm {' '.join(args)} failed:\n{done.stderr}"
        return done

    return run


def template(
    run_helm: Callable[..., subprocess.CompletedProcess[str]],
    *sets: str,
    namespace: str = SYSTEM_NS,
    crds: bool = False,
) -> list[Obj]:
    args = ["template", RELEASE, str(CHART), "-n", namespace, *sets]
    return objects(run_helm(*args, *(["--include-crds"] if crds else [])).stdout)


def without_helm_labels(obj: Obj) -> Obj:
    obj = json.loads(json.dumps(obj))
    for meta in (obj["metadata"], obj.get("spec", {}).get("template", {}).get("metadata", {})):
        labels = meta.get("labels", {})
        for label in HELM_LABELS:
            labels.pop(label, None)
        if "labels" in meta and not labels:
            del meta["labels"]  # objects of the overlay alone carry no labels of their own
    return obj


def by_key(objs: list[Obj]) -> dict[tuple[str, str], Obj]:
    return {(o["kind"], o["metadata"]["name"]): o for o in objs}


def workloads(objs: list[Obj]) -> list[Obj]:
    return [o for o in objs if o["kind"] in ("Deployment", "DaemonSet")]


# --- rendering --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("sets", "tree"),
    [([], BASE), (["--set", "certificates.mode=cert-manager"], CERT_MANAGER)],
    ids=["self-managed = base", "cert-manager = overlay"],
)
def test_default_values_render_exactly_what_kustomize_renders(
    run_helm: Callable[..., subprocess.CompletedProcess[str]], sets: list[str], tree: Path
) -> None:
    chart = by_key([without_helm_labels(o) for o in template(run_helm, *sets, crds=True)])
    kustomize = by_key([o for o in objects(render(tree)) if o["kind"] != "Namespace"])
    assert sorted(chart) == sorted(kustomize)
    for key, expected in kustomize.items():
        assert chart[key] == expected, f"{key[0]}/{key[1]} differs from kustomize"


def _containers(objs: list[Obj]) -> list[Obj]:
    return [c for o in workloads(objs) for c in o["spec"]["template"]["spec"]["containers"]]


def _pod_spec(objs: list[Obj], kind: str) -> Obj:
    (found,) = [o for o in objs if o["kind"] == kind]
    spec: Obj = found["spec"]["template"]["spec"]
    return spec


TOLERATION = {"key": "dedicated", "operator": "Equal", "value": "infra", "effect": "NoSchedule"}
RESOURCES = {"requests": {"cpu": "1", "memory": "2Gi"}, "limits": {"cpu": "4", "memory": "8Gi"}}
# (values, what must hold of the rendered objects)
VALUE_CASES: dict[str, tuple[Obj, Callable[[list[Obj]], bool]]] = {
    "image by digest": (
        {"image": {"repository": "registry.example/ml/queuectl", "digest": DIGEST}},
        lambda objs: (
            {c["image"] for c in _containers(objs)} == {f"registry.example/ml/queuectl@{DIGEST}"}
        ),
    ),
    "image by tag": (
        {"image": {"tag": "0.2.0", "pullPolicy": "Always"}},
        lambda objs: (
            {(c["image"], c["imagePullPolicy"]) for c in _containers(objs)}
            == {("queuectl:0.2.0", "Always")}
        ),
    ),
    "empty tag is the appVersion": (
        {"image": {"tag": ""}},
        lambda objs: {c["image"] for c in _containers(objs)} == {"queuectl:0.1.0"},
    ),
    "replicas": (
        {"controller": {"replicas": 3}},
        lambda objs: by_key(objs)["Deployment", "queuectl-controller"]["spec"]["replicas"] == 3,
    ),
    "controller resources": (
        {"controller": {"resources": RESOURCES}},
        lambda objs: _pod_spec(objs, "Deployment")["containers"][0]["resources"] == RESOURCES,
    ),
    "controller placement": (
        {"controller": {"nodeSelector": {"role": "infra"}, "tolerations": [TOLERATION]}},
        lambda objs: (
            _pod_spec(objs, "Deployment")["nodeSelector"] == {"role": "infra"}
            and _pod_spec(objs, "Deployment")["tolerations"] == [TOLERATION]
        ),
    ),
    "agent placement replaces its tolerations": (
        {"agent": {"nodeSelector": {"gpu": "yes"}, "tolerations": [TOLERATION]}},
        lambda objs: (
            _pod_spec(objs, "DaemonSet")["nodeSelector"] == {"gpu": "yes"}
            and _pod_spec(objs, "DaemonSet")["tolerations"] == [TOLERATION]
        ),
    ),
    "pull secrets": (
        {"image": {"pullSecrets": [{"name": "regcred"}]}},
        lambda objs: all(
            o["spec"]["template"]["spec"]["imagePullSecrets"] == [{"name": "regcred"}]
            for o in workloads(objs)
        ),
    ),
    "agent disabled": (
        {"agent": {"enabled": False}},
        lambda objs: (
            not [o for o in objs if "agent" in o["metadata"]["name"]]
            and ("Deployment", "queuectl-controller") in by_key(objs)
        ),
    ),
    "metrics Services disabled": (
        {"metrics": {"service": {"enabled": False}}},
        lambda objs: (
            {o["metadata"]["name"] for o in objs if o["kind"] == "Service"} == {"queuectl-webhook"}
        ),
    ),
    "cert-manager": (
        {"certificates": {"mode": "cert-manager"}},
        lambda objs: (
            {"Issuer", "Certificate"} <= {o["kind"] for o in objs}
            and "--cert-mode=external" in _pod_spec(objs, "Deployment")["containers"][0]["args"]
        ),
    ),
}


@pytest.mark.parametrize("case", VALUE_CASES)
def test_the_values_a_platform_engineer_sets_land_where_they_should(
    run_helm: Callable[..., subprocess.CompletedProcess[str]], tmp_path: Path, case: str
) -> None:
    values, holds = VALUE_CASES[case]
    (tmp_path / "values.yaml").write_text(yaml.safe_dump(values))
    rendered = template(run_helm, "-f", str(tmp_path / "values.yaml"))
    assert holds(rendered), yaml.safe_dump_all(workloads(rendered))


def test_the_release_namespace_replaces_queuectl_system_everywhere(
    run_helm: Callable[..., subprocess.CompletedProcess[str]],
) -> None:
    for mode in ("self", "cert-manager"):
        rendered = template(run_helm, "--set", f"certificates.mode={mode}", namespace="team-ml")
        assert SYSTEM_NS not in yaml.safe_dump_all(rendered)
        namespaced = [o for o in rendered if "namespace" in o["metadata"]]
        # The one object that must live elsewhere: the visibility API server reads the
        # front-proxy settings the API server publishes in kube-system.
        (reader,) = [o for o in namespaced if o["metadata"]["namespace"] == "kube-system"]
        assert (reader["kind"], reader["roleRef"]["name"]) == (
            "RoleBinding",
            "extension-apiserver-authentication-reader",
        )
        assert [s["namespace"] for s in reader["subjects"]] == ["team-ml"]
        namespaced.remove(reader)
        assert {o["metadata"]["namespace"] for o in namespaced} == {"team-ml"}
        for hook in (w for o in rendered if o["kind"] in WEBHOOK_KINDS for w in o["webhooks"]):
            assert hook["clientConfig"]["service"]["namespace"] == "team-ml"


@pytest.mark.parametrize(
    ("setting", "named"),
    [
        ("certificates.mode=vault", "/certificates/mode"),
        ("image.digest=latest", "/image/digest"),
        ("controller.replicas=0", "/controller/replicas"),
        ("controller.replica=3", "'replica' not allowed"),  # a misspelt key is refused
        ("agent.enabled=maybe", "/agent/enabled"),
    ],
)
def test_bad_values_are_refused_naming_the_value(
    run_helm: Callable[..., subprocess.CompletedProcess[str]], setting: str, named: str
) -> None:
    done = run_helm("template", RELEASE, str(CHART), "--set", setting, check=False)
    assert done.returncode != 0, f"{setting} was accepted"
    assert named in done.stderr, done.stderr


def test_helm_lint_passes_in_both_certificate_modes(
    run_helm: Callable[..., subprocess.CompletedProcess[str]],
) -> None:
    for mode in ("self", "cert-manager"):
        done = run_helm("lint", "--strict", str(CHART), "--set", f"certificates.mode={mode}")
        assert "0 chart(s) failed" in done.stdout, done.stdout


# --- on the real API server -------------------------------------------------------------------


def test_the_api_server_accepts_every_rendered_object(
    control_plane: Cluster,
    namespace: str,
    run_helm: Callable[..., subprocess.CompletedProcess[str]],
    cert_manager_stubs: None,
) -> None:
    """Server-side dry run with strict field validation, both certificate modes, release
    namespace = a fresh namespace (webhook configurations are never really created here)."""
    for mode in ("self", "cert-manager"):
        rendered = template(run_helm, "--set", f"certificates.mode={mode}", namespace=namespace)
        manifest = yaml.safe_dump_all(rendered)
        assert_each_object_accepted(rendered, dry_run_apply(control_plane, manifest))


def _webhook_configurations(cluster: Cluster) -> list[str]:
    names = []
    for kind in WEBHOOK_KINDS:
        done = cluster.kubectl("get", kind, "-o", "json")
        for item in json.loads(done.stdout)["items"]:
            services = [w["clientConfig"].get("service") or {} for w in item.get("webhooks", [])]
            if any(s.get("name") == "queuectl-webhook" for s in services):
                names.append(f"{kind}/{item['metadata']['name']}")
    return names


def _labelled_job(namespace: str) -> str:
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"generateName": "after-uninstall-", "namespace": namespace,
                     "labels": {"queuectl.io/queue-name": "any"}},
        "spec": {"template": {"spec": {"restartPolicy": "Never",
                                       "containers": [{"name": "c", "image": "busybox"}]}}},
    }  # fmt: skip
    return yaml.safe_dump(job)


@pytest.fixture
def release(
    control_plane: Cluster,
    namespace: str,
    run_helm: Callable[..., subprocess.CompletedProcess[str]],
) -> Iterator[Callable[..., subprocess.CompletedProcess[str]]]:
    """`helm --kubeconfig ... -n NAMESPACE`, uninstalling the release whatever happens."""
    assert _webhook_configurations(control_plane) == [], "a queuectl webhook is already installed"

    def in_cluster(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        return run_helm(*args, "-n", namespace, "--kubeconfig", control_plane.kubeconfig,
                        check=check)  # fmt: skip

    try:
        yield in_cluster
    finally:
        in_cluster("uninstall", RELEASE, "--wait", "--ignore-not-found", check=False)


def test_helm_install_creates_the_objects_upgrade_keeps_the_ca_and_uninstall_leaves_no_webhook(
    control_plane: Cluster,
    namespace: str,
    release: Callable[..., subprocess.CompletedProcess[str]],
    run_helm: Callable[..., subprocess.CompletedProcess[str]],
) -> None:
    expected = template(run_helm, namespace=namespace)
    installed = release("install", RELEASE, str(CHART), "--set", "controller.replicas=1")
    assert f"kubectl label namespace {namespace} pod-security" in installed.stdout  # NOTES
    assert RELEASE in release("list", "-q").stdout.split()
    for obj in expected:
        in_system = obj["metadata"].get("namespace") == "kube-system"  # the auth reader
        where = (
            ["-n", "kube-system" if in_system else namespace]
            if "namespace" in obj["metadata"]
            else []
        )
        done = control_plane.kubectl("get", obj["kind"], obj["metadata"]["name"], *where,
                                     "-o", "json", check=False)  # fmt: skip
        assert done.returncode == 0, f"{obj['kind']}/{obj['metadata']['name']}: {done.stderr}"
        live = json.loads(done.stdout)
        assert live["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "Helm"
        if obj["kind"] in WEBHOOK_KINDS:
            for hook in live["webhooks"]:
                assert hook["clientConfig"]["service"]["namespace"] == namespace
                assert hook["failurePolicy"] == next(
                    w["failurePolicy"] for w in obj["webhooks"] if w["name"] == hook["name"]
                )
        if obj["kind"] == "Deployment":
            assert live["spec"]["replicas"] == 1
    assert len(_webhook_configurations(control_plane)) == 2

    # The controller (self mode) patches caBundle; an upgrade must keep it (three-way merge).
    patch = [{"op": "add", "path": "/webhooks/0/clientConfig/caBundle", "value": CA_BUNDLE}]
    control_plane.kubectl("patch", "validatingwebhookconfiguration", "queuectl-validating",
                          "--type=json", "-p", json.dumps(patch))  # fmt: skip
    release("upgrade", RELEASE, str(CHART), "--set", "controller.replicas=2")
    got = control_plane.kubectl("get", "validatingwebhookconfiguration", "queuectl-validating",
                                "-o", "json")  # fmt: skip
    live = json.loads(got.stdout)
    assert live["webhooks"][0]["clientConfig"].get("caBundle") == CA_BUNDLE
    deployment = control_plane.kubectl("get", "deployment", "queuectl-controller", "-n", namespace,
                                       "-o", "jsonpath={.spec.replicas}").stdout  # fmt: skip
    assert deployment == "2"

    release("uninstall", RELEASE, "--wait")

    assert _webhook_configurations(control_plane) == []
    for obj in (o for o in expected if "namespace" not in o["metadata"]):  # cluster-scoped
        done = control_plane.kubectl("get", obj["kind"], obj["metadata"]["name"], check=False)
        assert done.returncode != 0, f"{obj['kind']}/{obj['metadata']['name']} outlived it"
    # Nothing blocks the cluster: a labelled Job is admitted (dry run calls every webhook).
    done = control_plane.kubectl("create", "--dry-run=server", "-f", "-",
                                 input=_labelled_job("default"), check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr
