"""The controller's RBAC grants what the system uses and nothing more.

`allowed` evaluates the rendered ClusterRole (everywhere) and Role (in queuectl's namespace only)
the way the RBAC authorizer does: a request is allowed when some rule matches group, resource
(with subresource), verb and, where the rule names any, the object's name.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, NamedTuple

import pytest
from deploy_manifests import Obj, one

from queuectl.api import names

SYSTEM_NS = names.SYSTEM_NAMESPACE
WEBHOOK_CONFIGS = "admissionregistration.k8s.io"


class Ask(NamedTuple):
    verb: str
    group: str
    resource: str
    namespace: str | None = None
    name: str | None = None


def _matches(rule: dict[str, Any], ask: Ask) -> bool:
    names_ok = not rule.get("resourceNames") or ask.name in rule["resourceNames"]
    return (
        ask.group in rule.get("apiGroups", [])
        and ask.resource in rule.get("resources", [])
        and ask.verb in rule.get("verbs", [])
        and names_ok
    )


def _rules(objects: Iterable[Obj], kind: str) -> list[dict[str, Any]]:
    return list(one(objects, kind, names.CONTROLLER_SERVICE_ACCOUNT)["rules"])


def allowed(objects: list[Obj], ask: Ask) -> bool:
    rules = _rules(objects, "ClusterRole")
    if ask.namespace == SYSTEM_NS:
        rules += _rules(objects, "Role")
    return any(_matches(rule, ask) for rule in rules)


GRANTED = [
    Ask("watch", "batch", "jobs"),
    Ask("patch", "batch", "jobs", "team-a"),
    Ask("update", "batch", "jobs", "team-a"),
    Ask("create", "queuectl.io", "workloads", "team-a"),
    Ask("delete", "queuectl.io", "workloads", "team-a"),
    Ask("patch", "queuectl.io", "workloads/status", "team-a"),
    Ask("update", "queuectl.io", "clusterqueues/status"),
    Ask("patch", "queuectl.io", "localqueues/status", "team-a"),
    Ask("watch", "queuectl.io", "workloadpriorityclasses"),
    Ask("watch", "queuectl.io", "admissionchecks"),
    Ask("patch", "queuectl.io", "admissionchecks/status"),
    Ask("list", "", "pods"),
    Ask("watch", "", "pods"),
    Ask("patch", "", "pods", "team-a"),  # lift a pod group's admission gate
    Ask("delete", "", "pods", "team-a"),  # stop a preempted pod group: pods cannot suspend
    Ask("list", "", "nodes"),
    Ask("patch", "", "nodes", name="gpu-node-1"),  # cordon during auto-drain
    Ask("watch", "", "namespaces"),
    Ask("watch", "scheduling.k8s.io", "priorityclasses"),
    # The provisioning check: placeholder pods at its own PriorityClass, or ProvisioningRequests.
    Ask("create", "", "pods", "team-a"),
    Ask("create", "scheduling.k8s.io", "priorityclasses"),
    Ask("create", "", "podtemplates", "team-a"),
    Ask("delete", "", "podtemplates", "team-a"),
    Ask("create", "autoscaling.x-k8s.io", "provisioningrequests", "team-a"),
    Ask("get", "autoscaling.x-k8s.io", "provisioningrequests", "team-a"),
    Ask("delete", "autoscaling.x-k8s.io", "provisioningrequests", "team-a"),
    Ask("create", "", "events", "team-a"),
    Ask("patch", "events.k8s.io", "events", "team-a"),
    Ask("update", "coordination.k8s.io", "leases", SYSTEM_NS, "queuectl-controller"),
    Ask("create", "", "secrets", SYSTEM_NS),
    Ask("get", "", "secrets", SYSTEM_NS, names.WEBHOOK_CERT_SECRET),
    Ask("patch", WEBHOOK_CONFIGS, "mutatingwebhookconfigurations", None,
        names.MUTATING_WEBHOOK_CONFIGURATION),
    Ask("patch", WEBHOOK_CONFIGS, "validatingwebhookconfigurations", None,
        names.VALIDATING_WEBHOOK_CONFIGURATION),
]  # fmt: skip

DENIED = [
    Ask("create", "batch", "jobs", "team-a"),  # users create Jobs, never the controller
    Ask("delete", "batch", "jobs", "team-a"),
    Ask("update", "", "pods", "team-a"),  # placeholders are created and deleted, never changed
    Ask("delete", "", "nodes", name="gpu-node-1"),
    Ask("update", "queuectl.io", "clusterqueues"),  # spec belongs to the admin
    Ask("delete", "queuectl.io", "clusterqueues"),
    Ask("get", "", "secrets", "team-a"),  # no Secret outside its own namespace
    Ask("list", "", "secrets"),
    Ask("update", "coordination.k8s.io", "leases", "kube-system"),
    # Its own namespace holds only two objects of these kinds it may touch, by name.
    Ask("get", "", "secrets", SYSTEM_NS, "someone-elses-token"),
    Ask("update", "", "secrets", SYSTEM_NS, "someone-elses-token"),
    Ask("list", "", "secrets", SYSTEM_NS),
    Ask("watch", "", "secrets", SYSTEM_NS),
    Ask("update", "coordination.k8s.io", "leases", SYSTEM_NS, "another-lease"),
    Ask("list", "coordination.k8s.io", "leases", SYSTEM_NS),
    Ask("patch", WEBHOOK_CONFIGS, "mutatingwebhookconfigurations", None, "someone-elses"),
    Ask("patch", WEBHOOK_CONFIGS, "validatingwebhookconfigurations", None, "someone-elses"),
    Ask("delete", WEBHOOK_CONFIGS, "validatingwebhookconfigurations", None,
        names.VALIDATING_WEBHOOK_CONFIGURATION),
    Ask("create", "apiextensions.k8s.io", "customresourcedefinitions"),
    Ask("bind", "rbac.authorization.k8s.io", "clusterroles"),
    Ask("create", "", "namespaces"),
    Ask("delete", "scheduling.k8s.io", "priorityclasses"),
    Ask("update", "autoscaling.x-k8s.io", "provisioningrequests", "team-a"),
]  # fmt: skip


@pytest.mark.parametrize("ask", GRANTED, ids=str)
def test_the_controller_may_do_what_the_system_needs(rendered: list[Obj], ask: Ask) -> None:
    assert allowed(rendered, ask)


@pytest.mark.parametrize("ask", DENIED, ids=str)
def test_the_controller_may_not_do_more(rendered: list[Obj], ask: Ask) -> None:
    assert not allowed(rendered, ask)


def test_no_rule_uses_a_wildcard(rendered: list[Obj]) -> None:
    for kind in ("ClusterRole", "Role"):
        for rule in _rules(rendered, kind):
            for field in ("apiGroups", "resources", "verbs", "resourceNames"):
                assert "*" not in rule.get(field, []), (kind, rule)


@pytest.mark.parametrize(("binding", "role_kind"), [
    ("ClusterRoleBinding", "ClusterRole"),
    ("RoleBinding", "Role"),
])  # fmt: skip
def test_roles_are_bound_to_the_controllers_service_account(
    rendered: list[Obj], binding: str, role_kind: str
) -> None:
    bound = one(rendered, binding, names.CONTROLLER_SERVICE_ACCOUNT)
    assert bound["roleRef"]["kind"] == role_kind
    assert bound["roleRef"]["name"] == names.CONTROLLER_SERVICE_ACCOUNT
    assert bound["subjects"] == [{
        "kind": "ServiceAccount",
        "name": names.CONTROLLER_SERVICE_ACCOUNT,
        "namespace": SYSTEM_NS,
    }]  # fmt: skip
    one(rendered, "ServiceAccount", names.CONTROLLER_SERVICE_ACCOUNT)


def test_every_crd_is_readable_and_its_status_writable(rendered: list[Obj]) -> None:
    crds = [o for o in rendered if o["kind"] == "CustomResourceDefinition"]
    for crd in crds:
        group, plural = crd["spec"]["group"], crd["spec"]["names"]["plural"]
        for verb in ("get", "list", "watch"):
            assert allowed(rendered, Ask(verb, group, plural, "team-a")), plural
        if any("status" in (v.get("subresources") or {}) for v in crd["spec"]["versions"]):
            assert allowed(rendered, Ask("patch", group, f"{plural}/status", "team-a")), plural
