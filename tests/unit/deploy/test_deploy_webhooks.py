"""The static webhook configurations send the right requests to the right routes, and fail safe.

Scenarios evaluate the configurations the way the API server does (rules, namespaceSelector,
objectSelector matching the old or the new object) with the webhook package's selector matcher.
The one CEL matchCondition that depends on the object, whether it carries one of queuectl's own
keys, is given by the scenario (`ours`); the requests are a user's, never the controller's.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple

import pytest
from deploy_manifests import Obj, one
from hypothesis import given, settings
from hypothesis import strategies as st

from queuectl.api import names
from queuectl.api.selectors import selector_matches
from queuectl.jobs.registry import KINDS

CONFIG_KINDS = ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration")
JOB = ("batch", "v1", "jobs")
CLUSTER_QUEUE = (names.GROUP, names.VERSION, "clusterqueues")
POD = ("", "v1", "pods")
LABELLED = {names.LABEL_QUEUE_NAME: "team-a"}
WORKLOAD = (names.GROUP, names.VERSION, "workloads")
WORKLOAD_STATUS = (names.GROUP, names.VERSION, "workloads/status")
ROUTES = {
    names.WEBHOOK_PATH_MUTATE_JOB,
    names.WEBHOOK_PATH_MUTATE_UNLABELLED_JOB,
    names.WEBHOOK_PATH_VALIDATE_JOB,
    names.WEBHOOK_PATH_VALIDATE_OWNED_JOB,
    names.WEBHOOK_PATH_VALIDATE_QUEUECTL,
    names.WEBHOOK_PATH_VALIDATE_WORKLOAD,
    names.WEBHOOK_PATH_MUTATE_POD,
    names.WEBHOOK_PATH_MUTATE_PINNED_POD,
    names.WEBHOOK_PATH_VALIDATE_POD,
    names.WEBHOOK_PATH_MUTATE_LWS,
    names.WEBHOOK_PATH_VALIDATE_SCALE,
}

Hit = tuple[str, str, str]  # (configuration kind, path, failurePolicy)


def webhooks(objects: list[Obj]) -> list[tuple[str, dict[str, Any]]]:
    return [(o["kind"], w) for o in objects if o["kind"] in CONFIG_KINDS for w in o["webhooks"]]


def _rule_matches(rule: Mapping[str, Any], resource: tuple[str, str, str], op: str) -> bool:
    group, version, plural = resource
    return (
        any(g in ("*", group) for g in rule["apiGroups"])
        and any(v in ("*", version) for v in rule["apiVersions"])
        and any(r in ("*", plural) for r in rule["resources"])
        and any(o in ("*", op) for o in rule["operations"])
    )


def called(
    objects: list[Obj],
    resource: tuple[str, str, str],
    op: str,
    namespace: str | None,
    new_labels: Mapping[str, str] | None,
    old_labels: Mapping[str, str] | None = None,
    owned: bool = False,
    ours: bool = False,
    claims: bool = False,
    pins: bool = False,
) -> set[Hit]:
    """Which webhooks the API server calls for this request, with their failure policies.
    `owned`: the object has a controller ownerReference (the `controlled` matchCondition);
    `ours`: it carries one of queuectl's keys (the `carries-our-keys` matchCondition);
    `claims`: a pod created naming a Job as controller without that Job's uid label (the
    `claims-a-job-unselected` matchCondition: a forged claim, or a manual selector's pod);
    `pins`: a pod carrying the pod-pins annotation (the `carries-pins` matchCondition)."""
    hits = set()
    for kind, hook in webhooks(objects):
        if not any(_rule_matches(rule, resource, op) for rule in hook["rules"]):
            continue
        conditions = {c["name"] for c in hook.get("matchConditions") or ()}
        if "controlled" in conditions and not owned:
            continue
        if "carries-our-keys" in conditions and not ours:
            continue
        if "claims-a-job-unselected" in conditions and not claims:
            continue
        if "carries-pins" in conditions and not pins:
            continue
        # namespaceSelector never skips cluster-scoped objects (namespace None).
        ns_labels = {"kubernetes.io/metadata.name": namespace} if namespace else None
        ns_selector = hook.get("namespaceSelector", {})
        if ns_labels is not None and not selector_matches(ns_selector, ns_labels):
            continue
        obj_selector = hook.get("objectSelector", {})
        versions = [labels for labels in (new_labels, old_labels) if labels is not None]
        if not any(selector_matches(obj_selector, labels) for labels in versions):
            continue
        hits.add((kind, hook["clientConfig"]["service"]["path"], hook["failurePolicy"]))
    return hits


MUTATE_FAIL = ("MutatingWebhookConfiguration", names.WEBHOOK_PATH_MUTATE_JOB, "Fail")
MUTATE_IGNORE = (
    "MutatingWebhookConfiguration",
    names.WEBHOOK_PATH_MUTATE_UNLABELLED_JOB,
    "Ignore",
)
VALIDATE_FAIL = ("ValidatingWebhookConfiguration", names.WEBHOOK_PATH_VALIDATE_JOB, "Fail")
VALIDATE_OWNED = (
    "ValidatingWebhookConfiguration",
    names.WEBHOOK_PATH_VALIDATE_OWNED_JOB,
    "Ignore",
)
VALIDATE_OURS = ("ValidatingWebhookConfiguration", names.WEBHOOK_PATH_VALIDATE_QUEUECTL, "Fail")
VALIDATE_WORKLOAD = ("ValidatingWebhookConfiguration", names.WEBHOOK_PATH_VALIDATE_WORKLOAD, "Fail")
MUTATE_POD = ("MutatingWebhookConfiguration", names.WEBHOOK_PATH_MUTATE_POD, "Fail")
MUTATE_PINNED = ("MutatingWebhookConfiguration", names.WEBHOOK_PATH_MUTATE_PINNED_POD, "Fail")
VALIDATE_POD = ("ValidatingWebhookConfiguration", names.WEBHOOK_PATH_VALIDATE_POD, "Fail")
VALIDATE_SCALE = ("ValidatingWebhookConfiguration", names.WEBHOOK_PATH_VALIDATE_SCALE, "Fail")
PYTORCH_SCALE = ("kubeflow.org", "v1", "pytorchjobs/scale")
# The owned-keys webhooks share the routes (and so the Hit) of the queued ones.
VALIDATE_KEYS_POD, VALIDATE_KEYS_JOB = VALIDATE_POD, VALIDATE_FAIL


class Req(NamedTuple):
    resource: tuple[str, str, str]
    op: str
    namespace: str | None
    new: dict[str, str] | None
    old: dict[str, str] | None = None
    owned: bool = False
    ours: bool = False
    claims: bool = False
    pins: bool = False


def job(op: str, namespace: str, new: dict[str, str], old: dict[str, str] | None = None) -> Req:
    return Req(JOB, op, namespace, new, old)


def child_job(op: str, old: dict[str, str] | None = None) -> Req:
    """An unlabelled Job some controller owns (a JobSet's, a CronJob's)."""
    return Req(JOB, op, "team-a", {}, old, owned=True)


def cluster_queue(op: str) -> Req:
    return Req(CLUSTER_QUEUE, op, None, {}, {} if op == "UPDATE" else None)


SYSTEM_NS = names.SYSTEM_NAMESPACE
# fmt: off
SCENARIOS = [
    pytest.param(job("CREATE", "team-a", LABELLED), {MUTATE_FAIL, VALIDATE_FAIL},
                 id="a queued Job cannot skip the queue"),
    pytest.param(job("CREATE", "team-a", {}), {MUTATE_IGNORE},
                 id="an unlabelled Job is defaulted best-effort"),
    # The API server calls a webhook when the old or the new object matches its selector, so a
    # label change reaches the Fail webhooks, which makes the check unskippable.
    pytest.param(job("UPDATE", "team-a", {}, LABELLED), {MUTATE_FAIL, VALIDATE_FAIL},
                 id="removing the queue label is checked"),
    pytest.param(job("UPDATE", "team-a", LABELLED, {}), {MUTATE_FAIL, VALIDATE_FAIL},
                 id="adding a queue label later is checked"),
    pytest.param(job("UPDATE", "team-a", LABELLED, LABELLED), {MUTATE_FAIL, VALIDATE_FAIL},
                 id="unsuspending a queued Job is checked"),
    pytest.param(job("UPDATE", "team-a", {}, {}), set(),
                 id="an unqueued Job's updates are left alone"),
    pytest.param(child_job("CREATE"), {MUTATE_IGNORE, VALIDATE_OWNED},
                 id="a child Job is checked against its owner, best-effort"),
    pytest.param(child_job("UPDATE", {}), {VALIDATE_OWNED},
                 id="and so is every change of it"),
    pytest.param(job("CREATE", "kube-system", LABELLED), set(),
                 id="kube-system is never intercepted"),
    pytest.param(job("CREATE", SYSTEM_NS, LABELLED), set(),
                 id="queuectl's own namespace is never intercepted"),
    pytest.param(job("DELETE", "team-a", LABELLED, LABELLED), set(),
                 id="deleting a Job is not intercepted"),
    pytest.param(cluster_queue("CREATE"), {VALIDATE_OURS},
                 id="our resources are validated beyond CEL"),
    pytest.param(cluster_queue("UPDATE"), {VALIDATE_OURS}, id="and on every change"),
    pytest.param(Req(WORKLOAD, "CREATE", "team-a", {}), {VALIDATE_WORKLOAD},
                 id="a Workload created by hand is checked"),
    pytest.param(Req(WORKLOAD_STATUS, "UPDATE", "team-a", {}, {}), {VALIDATE_WORKLOAD},
                 id="so is a Workload status written by hand"),
    pytest.param(Req(POD, "CREATE", "team-a", LABELLED), {MUTATE_POD, VALIDATE_POD},
                 id="a queued pod cannot skip its gate"),
    pytest.param(Req(POD, "UPDATE", "team-a", {}, LABELLED), {MUTATE_POD, VALIDATE_POD},
                 id="removing a pod's queue label is checked"),
    pytest.param(Req(POD, "CREATE", "team-a", {"app": "web"}), set(),
                 id="every other pod never waits on queuectl"),
    pytest.param(Req(POD, "CREATE", "team-a", {}, owned=True, claims=True), {VALIDATE_POD},
                 id="a pod claiming a Job whose uid label it lacks is checked, failing closed"),
    pytest.param(Req(POD, "CREATE", "team-a", {"app": "web"}, owned=True), set(),
                 id="the pods the Job controller makes never wait on queuectl"),
    pytest.param(Req(POD, "CREATE", "team-a", {"app": "web"}, owned=True, pins=True),
                 {MUTATE_PINNED},
                 id="a pod of an admitted sliced job is pinned to its place, failing closed"),
    pytest.param(Req(POD, "UPDATE", "team-a", {"app": "web"}, {}, owned=True, pins=True), set(),
                 id="and only when it is created"),
    pytest.param(Req(POD, "CREATE", "kube-system", {}, owned=True, pins=True), set(),
                 id="never in kube-system"),
    pytest.param(Req(POD, "CREATE", "kube-system", LABELLED), set(),
                 id="nor does any pod in kube-system"),
    pytest.param(Req(POD, "UPDATE", "team-a", {}, {}, ours=True), {VALIDATE_KEYS_POD},
                 id="an unqueued pod carrying our keys is checked"),
    pytest.param(Req(JOB, "CREATE", "team-a", {}, ours=True), {MUTATE_IGNORE, VALIDATE_KEYS_JOB},
                 id="so is an unlabelled Job carrying them (a JobSet's child)"),
    pytest.param(Req(JOB, "UPDATE", "team-a", {}, {}, owned=True, ours=True),
                 {VALIDATE_OWNED, VALIDATE_KEYS_JOB},
                 id="a child carrying our keys is checked against its owner and for the keys"),
    pytest.param(Req(JOB, "UPDATE", "team-a", LABELLED, LABELLED, ours=True),
                 {MUTATE_FAIL, VALIDATE_FAIL}, id="a queued one is checked once"),
    # A Scale carries no labels: the scale hook has no objectSelector and reads the job.
    pytest.param(Req(PYTORCH_SCALE, "UPDATE", "team-a", {}, {}), {VALIDATE_SCALE},
                 id="kubectl scale on a job kind is checked, failing closed"),
    pytest.param(Req(PYTORCH_SCALE, "UPDATE", "kube-system", {}, {}), set(),
                 id="but not in kube-system"),
    pytest.param(Req(("apps", "v1", "deployments/scale"), "UPDATE", "team-a", {}, {}), set(),
                 id="a Deployment's scale never waits on queuectl"),
]
# fmt: on


@pytest.mark.parametrize(("request_", "expected"), SCENARIOS)
def test_requests_reach_the_right_webhooks(
    rendered: list[Obj], request_: Req, expected: set[Hit]
) -> None:
    assert called(rendered, *request_) == expected


@settings(max_examples=60, deadline=None)
@given(
    labels=st.dictionaries(
        st.sampled_from([names.LABEL_QUEUE_NAME, names.LABEL_PRIORITY_CLASS, "app", "team"]),
        st.sampled_from(["a", "b", "team-a"]),
    ),
    namespace=st.sampled_from(["default", "team-a", "research"]),
)
def test_every_job_create_is_seen_once_and_fails_closed_only_when_queued(
    base: list[Obj], labels: dict[str, str], namespace: str
) -> None:
    hits = called(base, JOB, "CREATE", namespace, labels)
    if names.LABEL_QUEUE_NAME in labels:
        assert hits == {MUTATE_FAIL, VALIDATE_FAIL}
    else:
        assert hits == {MUTATE_IGNORE}


def test_every_registered_kinds_scale_reaches_the_scale_webhook_only(
    rendered: list[Obj],
) -> None:
    for kind in KINDS.values():
        res = kind.resource
        scale = (res.group, res.version, f"{res.plural}/scale")
        assert called(rendered, scale, "UPDATE", "team-a", {}, {}) == {VALIDATE_SCALE}, res.kind


def test_every_webhook_is_quick_side_effect_free_and_speaks_v1(rendered: list[Obj]) -> None:
    hooks = webhooks(rendered)
    assert len(hooks) >= 4
    assert len({hook["name"] for _, hook in hooks}) == len(hooks)
    for _, hook in hooks:
        assert hook["sideEffects"] == "None", hook["name"]
        assert hook["admissionReviewVersions"] == ["v1"], hook["name"]
        assert hook["timeoutSeconds"] == 5, hook["name"]
        assert hook["name"].endswith(".queuectl.io"), hook["name"]


def test_every_webhook_calls_our_service(rendered: list[Obj]) -> None:
    svc = one(rendered, "Service", names.WEBHOOK_SERVICE)
    [port] = [p for p in svc["spec"]["ports"] if p["name"] == "webhook"]
    for _, hook in webhooks(rendered):
        ref = hook["clientConfig"]["service"]
        assert (ref["name"], ref["namespace"]) == (names.WEBHOOK_SERVICE, names.SYSTEM_NAMESPACE)
        assert ref["port"] == port["port"]
        assert ref["path"] in ROUTES


def test_configurations_carry_the_names_the_controller_patches(rendered: list[Obj]) -> None:
    assert one(rendered, "MutatingWebhookConfiguration")["metadata"]["name"] == (
        names.MUTATING_WEBHOOK_CONFIGURATION
    )
    assert one(rendered, "ValidatingWebhookConfiguration")["metadata"]["name"] == (
        names.VALIDATING_WEBHOOK_CONFIGURATION
    )
