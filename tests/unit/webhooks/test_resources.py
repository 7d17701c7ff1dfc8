"""ClusterQueue, Cohort and LocalQueue: the checks beyond CEL, each with a message that says how."""

from __future__ import annotations

from typing import Any

import pytest
from webhook_cases import NS, request

from queuectl.api import names
from queuectl.webhooks.lookup import InMemoryLookup
from queuectl.webhooks.resources import validate_queuectl


def kind(k: str) -> dict[str, str]:
    return {"group": names.GROUP, "version": names.VERSION, "kind": k}


def obj(k: str, name: str, spec: dict[str, Any], namespace: str | None = None) -> dict[str, Any]:
    meta = {"name": name} | ({"namespace": namespace} if namespace else {})
    return {"apiVersion": names.API_VERSION, "kind": k, "metadata": meta, "spec": spec}


def flavor(name: str, *resources: str, **limits: str) -> dict[str, Any]:
    return {
        "name": name,
        "resources": [{"name": r, "nominalQuota": "8"} | limits for r in resources],
    }


def group(covered: list[str], *flavors: dict[str, Any]) -> dict[str, Any]:
    return {"coveredResources": covered, "flavors": list(flavors)}


GPU, CPU = "nvidia.com/gpu", "cpu"


def cq_request(spec: dict[str, Any], old: dict[str, Any] | None = None) -> dict[str, Any]:
    return request(
        obj("ClusterQueue", "cq", spec), old=old, kind=kind("ClusterQueue"), namespace=None
    )


def refusal(response: dict[str, Any]) -> str:
    assert response["allowed"] is False
    assert response["status"]["code"] == 422
    message: str = response["status"]["message"]
    return message


@pytest.mark.parametrize(
    ("scenario", "spec", "fragment"),
    [
        (
            "resource covered by two groups",
            {
                "resourceGroups": [
                    group([GPU], flavor("h100", GPU)),
                    group([GPU, CPU], flavor("a100", GPU, CPU)),
                ]
            },
            "resource 'nvidia.com/gpu' is covered by resourceGroups[0] and resourceGroups[1]; "
            "list each resource in one group only",
        ),
        (
            "flavor in two groups",
            {
                "resourceGroups": [
                    group([GPU], flavor("h100", GPU)),
                    group([CPU], flavor("h100", CPU)),
                ]
            },
            "flavor 'h100' appears in resourceGroups[0] and resourceGroups[1]; a flavor belongs to "
            "one group, so merge its resources into that group",
        ),
        (
            "flavor twice in one group",
            {"resourceGroups": [group([GPU], flavor("h100", GPU), flavor("h100", GPU))]},
            "flavor 'h100' appears twice in resourceGroups[0]",
        ),
        (
            "flavor resources out of order",
            {"resourceGroups": [group([CPU, GPU], flavor("h100", GPU, CPU))]},
            "lists resources ['nvidia.com/gpu', 'cpu'], "
            "but the group covers ['cpu', 'nvidia.com/gpu']",
        ),
        (
            "borrowing limit without a cohort",
            {"resourceGroups": [group([GPU], flavor("h100", GPU, borrowingLimit="4"))]},
            "borrowingLimit of 'h100'/nvidia.com/gpu need spec.cohortName",
        ),
    ],
)
def test_cluster_queue_problems_are_refused(
    lookup: InMemoryLookup, scenario: str, spec: dict[str, Any], fragment: str
) -> None:
    message = refusal(validate_queuectl(cq_request(spec), lookup))
    assert message.startswith("ClusterQueue cq: "), scenario
    assert fragment in message, scenario


def test_a_sound_cluster_queue_is_allowed(lookup: InMemoryLookup) -> None:
    spec = {
        "cohortName": "research",
        "resourceGroups": [
            group([GPU], flavor("h100", GPU, lendingLimit="2"), flavor("a100", GPU)),
            group([CPU], flavor("default", CPU)),
        ],
    }
    assert validate_queuectl(cq_request(spec, old=obj("ClusterQueue", "cq", {})), lookup)["allowed"]


def cohort_request(
    name: str, parent: str | None, spec: dict[str, Any] | None = None
) -> dict[str, Any]:
    body = dict(spec or {}) | ({"parentName": parent} if parent else {})
    return request(obj("Cohort", name, body), kind=kind("Cohort"), namespace=None)


@pytest.mark.parametrize(
    ("scenario", "name", "parent", "cycle"),
    [
        ("own parent", "org", "org", "org -> org"),
        ("root under its grandchild", "org", "team-x", "org -> team-x -> research -> org"),
        ("middle under its child", "research", "team-x", "research -> team-x -> research"),
    ],
)
def test_cohort_cycles_are_refused(
    lookup: InMemoryLookup, scenario: str, name: str, parent: str, cycle: str
) -> None:
    message = refusal(validate_queuectl(cohort_request(name, parent), lookup))
    assert f"makes a cycle ({cycle}); cohorts form a tree" in message, scenario


def test_joining_an_already_looping_chain_is_refused(lookup: InMemoryLookup) -> None:
    lookup.cohort_parents |= {"a": "b", "b": "a"}
    message = refusal(validate_queuectl(cohort_request("new", "a"), lookup))
    assert "already loops (a -> b -> a)" in message


@pytest.mark.parametrize(
    ("scenario", "name", "parent"),
    [
        ("new root", "other", None),
        ("new leaf under a deep chain", "team-y", "team-x"),
        ("parent not created yet", "team-z", "future"),
        ("reparent within the tree", "team-x", "org"),
    ],
)
def test_cohort_trees_are_allowed(
    lookup: InMemoryLookup, scenario: str, name: str, parent: str | None
) -> None:
    assert validate_queuectl(cohort_request(name, parent), lookup)["allowed"] is True, scenario


def test_cohort_resource_groups_are_checked_too(lookup: InMemoryLookup) -> None:
    spec = {
        "resourceGroups": [group([GPU], flavor("h100", GPU)), group([GPU], flavor("a100", GPU))]
    }
    message = refusal(validate_queuectl(cohort_request("org", None, spec), lookup))
    assert message.startswith("Cohort org: resource 'nvidia.com/gpu' is covered by")


def lq_request(
    cluster_queue: str, namespace: str = NS, old_cq: str | None = None
) -> dict[str, Any]:
    new = obj("LocalQueue", "gpu", {"clusterQueue": cluster_queue}, namespace)
    old = obj("LocalQueue", "gpu", {"clusterQueue": old_cq}, namespace) if old_cq else None
    return request(new, old=old, kind=kind("LocalQueue"), namespace=namespace)


@pytest.mark.parametrize(
    ("scenario", "cq", "namespace", "fragment"),
    [
        (
            "selector excludes the namespace",
            "cq-a",
            "team-b",
            "ClusterQueue 'cq-a' does not accept work from namespace 'team-b': its "
            'spec.namespaceSelector {"matchLabels": {"team": "a"}} does not match the '
            "namespace's labels",
        ),
        ("fix suggested", "cq-a", "team-b", "`kubectl label namespace team-b KEY=VALUE`"),
        ("nil selector selects nothing", "cq-none", NS, "is unset, which selects no namespace"),
        (
            "unknown namespace judged by its name label",
            "cq-a",
            "fresh",
            "does not accept work from namespace 'fresh'",
        ),
    ],
)
def test_local_queue_outside_the_selector_is_refused(
    lookup: InMemoryLookup, scenario: str, cq: str, namespace: str, fragment: str
) -> None:
    message = refusal(validate_queuectl(lq_request(cq, namespace), lookup))
    assert message.startswith(f"LocalQueue {namespace}/gpu: "), scenario
    assert fragment in message, scenario


def test_a_local_queue_in_a_namespace_not_seen_yet(lookup: InMemoryLookup) -> None:
    """Applied with its namespace, before the namespace reached the cache: judged by the name
    label every namespace carries; a term about any other label cannot be decided yet, so a
    ClusterQueue closed to team=b does not take it on a guess (the controller agrees)."""
    name = names.LABEL_NAMESPACE_NAME
    lookup.cluster_queues["cq-by-name"] = {"matchLabels": {name: "fresh"}}
    not_b = [{"key": "team", "operator": "NotIn", "values": ["b"]}]
    lookup.cluster_queues["cq-not-b"] = {"matchExpressions": not_b}
    assert validate_queuectl(lq_request("cq-all", "fresh"), lookup)["allowed"] is True
    assert validate_queuectl(lq_request("cq-by-name", "fresh"), lookup)["allowed"] is True
    message = refusal(validate_queuectl(lq_request("cq-not-b", "fresh"), lookup))
    assert "does not accept work from namespace 'fresh'" in message
    assert "not in the webhook's cache yet, so only its name label is known" in message
    lookup.namespaces["fresh"] = {name: "fresh", "team": "a"}  # its event arrives
    assert validate_queuectl(lq_request("cq-not-b", "fresh"), lookup)["allowed"] is True


def test_local_queue_cluster_queue_is_immutable(lookup: InMemoryLookup) -> None:
    message = refusal(validate_queuectl(lq_request("cq-all", old_cq="cq-a"), lookup))
    assert "spec.clusterQueue is immutable (was 'cq-a')" in message


def test_local_queue_allowed_cases(lookup: InMemoryLookup) -> None:
    assert validate_queuectl(lq_request("cq-a"), lookup)["allowed"] is True
    assert validate_queuectl(lq_request("cq-all", "team-b"), lookup)["allowed"] is True
    pending = validate_queuectl(lq_request("cq-later"), lookup)
    assert pending["allowed"] is True
    assert pending["warnings"] == [
        f"ClusterQueue 'cq-later' does not exist yet; this LocalQueue stays inactive until it "
        f"exists and its namespaceSelector selects namespace '{NS}'"
    ]


def test_other_kinds_and_groups_pass(lookup: InMemoryLookup) -> None:
    rf = request(obj("ResourceFlavor", "h100", {}), kind=kind("ResourceFlavor"), namespace=None)
    assert validate_queuectl(rf, lookup)["allowed"] is True
    foreign = request(
        obj("ClusterQueue", "x", {}), kind={"group": "kueue.x-k8s.io", "kind": "ClusterQueue"}
    )
    assert validate_queuectl(foreign, lookup)["allowed"] is True
