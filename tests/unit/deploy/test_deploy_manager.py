"""The rendered controller Deployment is safe to run: hardened, probed, sized, highly available."""

from __future__ import annotations

from typing import Any

import pytest
from deploy_manifests import Obj, one

from queuectl.api import names

Container = dict[str, Any]

EXPECTED_KINDS = {
    "Namespace",
    "CustomResourceDefinition",
    "ServiceAccount",
    "ClusterRole",
    "ClusterRoleBinding",
    "Role",
    "RoleBinding",
    "Service",
    "MutatingWebhookConfiguration",
    "ValidatingWebhookConfiguration",
    "Deployment",
    "PodDisruptionBudget",
    "NetworkPolicy",
}
CLUSTER_SCOPED = {
    "Namespace",
    "CustomResourceDefinition",
    "ClusterRole",
    "ClusterRoleBinding",
    "MutatingWebhookConfiguration",
    "ValidatingWebhookConfiguration",
    "ValidatingAdmissionPolicy",
    "ValidatingAdmissionPolicyBinding",
    "APIService",
}
AUTH_READER = ("RoleBinding", "kube-system", "queuectl-controller-auth-reader")
"""The one object outside the system namespace: where Kubernetes keeps the front-proxy CA
(kube-system/extension-apiserver-authentication), the controller may read it, and only that."""


def deployment(objects: list[Obj]) -> Obj:
    return one(objects, "Deployment", "queuectl-controller")


def controller(objects: list[Obj]) -> Container:
    containers = deployment(objects)["spec"]["template"]["spec"]["containers"]
    assert [c["name"] for c in containers] == ["controller"]
    return containers[0]  # type: ignore[no-any-return]


def flag(container: Container, name: str) -> str | None:
    for arg in container["args"]:
        if arg == f"--{name}":
            return ""
        if arg.startswith(f"--{name}="):
            return str(arg.split("=", 1)[1])
    return None


def container_port(container: Container, port_name: str) -> int:
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    return int(ports[port_name])


def test_the_base_holds_every_kind_the_system_needs(base: list[Obj]) -> None:
    kinds = {o["kind"] for o in base}
    crds_landed = any(o["kind"] == "CustomResourceDefinition" for o in base)
    missing = EXPECTED_KINDS - kinds - (set() if crds_landed else {"CustomResourceDefinition"})
    assert not missing
    assert len(
        {(o["kind"], o["metadata"].get("namespace"), o["metadata"]["name"]) for o in base}
    ) == len(base)


def test_everything_namespaced_lives_in_the_system_namespace(rendered: list[Obj]) -> None:
    for obj in rendered:
        ns = obj["metadata"].get("namespace")
        if (obj["kind"], ns, obj["metadata"]["name"]) == AUTH_READER:
            assert obj["roleRef"] == {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "Role",
                "name": "extension-apiserver-authentication-reader",
            }
            assert [s["name"] for s in obj["subjects"]] == [names.CONTROLLER_SERVICE_ACCOUNT]
        elif obj["kind"] in CLUSTER_SCOPED:
            assert ns is None, obj["metadata"]["name"]
        else:
            assert ns == names.SYSTEM_NAMESPACE, (obj["kind"], obj["metadata"]["name"])
    assert one(rendered, "Namespace")["metadata"]["name"] == names.SYSTEM_NAMESPACE


def test_two_replicas_spread_over_nodes_and_rolled_without_losing_one(rendered: list[Obj]) -> None:
    spec = deployment(rendered)["spec"]
    assert spec["replicas"] == 2
    assert spec["strategy"]["rollingUpdate"]["maxUnavailable"] == 0
    anti = spec["template"]["spec"]["affinity"]["podAntiAffinity"]
    term = anti["preferredDuringSchedulingIgnoredDuringExecution"][0]["podAffinityTerm"]
    assert term["topologyKey"] == names.LABEL_HOSTNAME
    assert term["labelSelector"]["matchLabels"] == spec["selector"]["matchLabels"]


def test_the_controller_runs_non_root_with_a_read_only_root(rendered: list[Obj]) -> None:
    pod = deployment(rendered)["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["runAsUser"] > 0
    assert pod["securityContext"]["seccompProfile"]["type"] == "RuntimeDefault"
    sc = controller(rendered)["securityContext"]
    assert sc["readOnlyRootFilesystem"] is True
    assert sc["allowPrivilegeEscalation"] is False
    assert sc["capabilities"]["drop"] == ["ALL"]
    assert not sc.get("privileged")
    assert pod["serviceAccountName"] == names.CONTROLLER_SERVICE_ACCOUNT


def test_the_only_writable_paths_are_volumes(rendered: list[Obj]) -> None:
    pod = deployment(rendered)["spec"]["template"]["spec"]
    volumes = {v["name"]: v for v in pod["volumes"]}
    mounts = {m["mountPath"]: m for m in controller(rendered)["volumeMounts"]}
    assert "emptyDir" in volumes[mounts["/tmp"]["name"]]
    for mount in mounts.values():
        assert mount["name"] in volumes


@pytest.mark.parametrize(
    ("probe", "path"),
    [("livenessProbe", "/healthz"), ("readinessProbe", "/readyz"), ("startupProbe", "/healthz")],
)
def test_probes_ask_the_health_port(rendered: list[Obj], probe: str, path: str) -> None:
    container = controller(rendered)
    get = container[probe]["httpGet"]
    assert get["path"] == path
    assert get["port"] == "health"
    assert str(container_port(container, "health")) == flag(container, "health-port")


@pytest.mark.parametrize(
    ("flag_name", "port_name"),
    [
        ("webhook-port", "webhook"),
        ("metrics-port", "metrics"),
        ("health-port", "health"),
    ],
)
def test_flags_and_container_ports_agree(
    rendered: list[Obj], flag_name: str, port_name: str
) -> None:
    container = controller(rendered)
    assert flag(container, flag_name) == str(container_port(container, port_name))


def test_the_controller_runs_the_controller_with_leader_election(rendered: list[Obj]) -> None:
    container = controller(rendered)
    assert container["args"][0] == "controller"
    assert flag(container, "leader-elect") == ""
    # The webhook is reachable by the Service; plain-HTTP health and metrics on the pod IP only.
    assert flag(container, "webhook-host") == "0.0.0.0"
    assert flag(container, "bind-host") is None
    assert flag(container, "health-host") == flag(container, "metrics-host") == "$(POD_IP)"
    assert container_port(container, "webhook") == names.WEBHOOK_PORT
    env = {e["name"]: e for e in container["env"]}
    assert env["POD_NAMESPACE"]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.namespace"
    assert env["POD_NAME"]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.name"
    assert env["POD_IP"]["valueFrom"]["fieldRef"]["fieldPath"] == "status.podIP"
    assert flag(container, "namespace") == "$(POD_NAMESPACE)"  # Lease and Secret live there


def test_resources_are_requested_and_bounded(rendered: list[Obj]) -> None:
    resources = controller(rendered)["resources"]
    for kind in ("requests", "limits"):
        assert set(resources[kind]) == {"cpu", "memory"}, kind


@pytest.mark.parametrize(
    ("service", "port_name"),
    [
        (names.WEBHOOK_SERVICE, "webhook"),
        (names.WEBHOOK_SERVICE, "visibility"),
        ("queuectl-controller-metrics", "metrics"),
    ],
)
def test_services_reach_the_controller_pods(
    rendered: list[Obj], service: str, port_name: str
) -> None:
    svc = one(rendered, "Service", service)
    pod_labels = deployment(rendered)["spec"]["template"]["metadata"]["labels"]
    assert svc["spec"]["selector"].items() <= pod_labels.items()
    [port] = [p for p in svc["spec"]["ports"] if p["name"] == port_name]
    assert port["targetPort"] == port_name
    assert port_name in {p["name"] for p in controller(rendered)["ports"]}


def test_the_visibility_api_service_calls_the_controllers_visibility_port(
    rendered: list[Obj],
) -> None:
    """Through the webhook Service (its certificate names it), on the port the controller's
    visibility listener serves."""
    api = one(rendered, "APIService", names.VISIBILITY_API_SERVICE)
    ref = api["spec"]["service"]
    assert (ref["name"], ref["namespace"]) == (names.WEBHOOK_SERVICE, names.SYSTEM_NAMESPACE)
    svc = one(rendered, "Service", names.WEBHOOK_SERVICE)
    [port] = [p for p in svc["spec"]["ports"] if p["port"] == ref["port"]]
    assert port["targetPort"] == "visibility"
    assert container_port(controller(rendered), "visibility") == names.VISIBILITY_PORT
    assert flag(controller(rendered), "visibility-port") == str(names.VISIBILITY_PORT)


def test_a_disruption_budget_keeps_one_replica_serving(rendered: list[Obj]) -> None:
    pdb = one(rendered, "PodDisruptionBudget")
    dep = deployment(rendered)
    assert pdb["spec"]["minAvailable"] == 1 < dep["spec"]["replicas"]
    assert pdb["spec"]["selector"] == dep["spec"]["selector"]


def test_the_network_policy_opens_the_webhook_to_all_and_metrics_to_prometheus(
    rendered: list[Obj],
) -> None:
    policy = one(rendered, "NetworkPolicy", "queuectl-controller")
    pod_labels = deployment(rendered)["spec"]["template"]["metadata"]["labels"]
    assert policy["spec"]["podSelector"]["matchLabels"].items() <= pod_labels.items()
    assert policy["spec"]["policyTypes"] == ["Ingress"]
    by_port = {rule["ports"][0]["port"]: rule for rule in policy["spec"]["ingress"]}
    assert set(by_port) == {"webhook", "metrics"}, "health is for the kubelet on the node only"
    assert "from" not in by_port["webhook"], "the API server's address is not selectable"
    sources = by_port["metrics"]["from"]
    assert {"namespaceSelector": {}, "podSelector": {"matchLabels": {
        "app.kubernetes.io/name": "prometheus"}}} in sources  # fmt: skip
    assert {"namespaceSelector": {"matchLabels": {"queuectl.io/metrics-scraper": "true"}}} in (
        sources
    )
    container = controller(rendered)
    for rule in policy["spec"]["ingress"]:
        container_port(container, rule["ports"][0]["port"])  # names a port the pod has
