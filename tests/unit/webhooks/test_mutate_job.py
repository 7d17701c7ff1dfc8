"""Job create: the mutating webhook queues the Job (suspend + labels), and only when it should."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from webhook_cases import NS, apply_patch, job, request

from queuectl.api import names
from queuectl.webhooks.jobs import mutate_job
from queuectl.webhooks.lookup import InMemoryLookup
from queuectl.webhooks.review import decode_patch

Q, CQ = names.LABEL_QUEUE_NAME, names.LABEL_CLUSTER_QUEUE


def mutated(response: dict[str, Any], obj: dict[str, Any]) -> dict[str, Any]:
    assert response["allowed"] is True
    return apply_patch(obj, decode_patch(response))


@pytest.mark.parametrize(
    ("scenario", "labels", "suspend", "want_labels", "want_suspend"),
    [
        ("labelled, queue exists", {Q: "gpu"}, None, {Q: "gpu", CQ: "cq-a"}, True),
        ("labelled, already suspended", {Q: "gpu"}, True, {Q: "gpu", CQ: "cq-a"}, True),
        ("labelled, explicitly unsuspended", {Q: "gpu"}, False, {Q: "gpu", CQ: "cq-a"}, True),
        ("unlabelled, default queue here", None, None, {Q: "default", CQ: "cq-default"}, True),
        (
            "other labels kept",
            {"app": "x", Q: "gpu"},
            None,
            {"app": "x", Q: "gpu", CQ: "cq-a"},
            True,
        ),
        (
            "spoofed cluster-queue fixed",
            {Q: "gpu", CQ: "cq-evil"},
            None,
            {Q: "gpu", CQ: "cq-a"},
            True,
        ),
        ("missing queue: suspended, no cq", {Q: "nope"}, None, {Q: "nope"}, True),
        ("missing queue: spoofed cq dropped", {Q: "nope", CQ: "cq-a"}, None, {Q: "nope"}, True),
    ],
)
def test_create_queues_the_job(
    lookup: InMemoryLookup,
    scenario: str,
    labels: dict[str, str] | None,
    suspend: bool | None,
    want_labels: dict[str, str],
    want_suspend: bool,
) -> None:
    obj = job(labels, suspend)
    out = mutated(mutate_job(request(obj), lookup), obj)
    assert out["metadata"]["labels"] == want_labels, scenario
    assert out["spec"]["suspend"] is want_suspend, scenario
    assert out["spec"]["template"] == obj["spec"]["template"], "the pod template is untouched"


def test_missing_queue_warns_how_to_find_queues(lookup: InMemoryLookup) -> None:
    response = mutate_job(request(job({Q: "nope"})), lookup)
    assert response["warnings"] == [
        f"LocalQueue {NS}/nope does not exist; the Job stays suspended until it is created "
        f"(`kubectl get localqueues -n {NS}` lists the queues here)"
    ]


@pytest.mark.parametrize(
    ("scenario", "req"),
    [
        ("unlabelled, no default queue", request(job(None), namespace="team-b")),
        ("unlabelled with other labels, no default", request(job({"a": "b"}), namespace="team-b")),
        ("not a Job", request(job({Q: "gpu"}), kind={"group": "", "version": "v1", "kind": "Pod"})),
        ("delete", request(None, old=job({Q: "gpu"}), operation="DELETE")),
    ],
)
def test_leaves_alone_what_is_not_queued(
    lookup: InMemoryLookup, scenario: str, req: dict[str, Any]
) -> None:
    response = mutate_job(req, lookup)
    assert response == {"uid": req["uid"], "allowed": True}, scenario


def test_already_queued_job_gets_no_patch(lookup: InMemoryLookup) -> None:
    response = mutate_job(request(job({Q: "gpu", CQ: "cq-a"}, suspend=True)), lookup)
    assert "patch" not in response and response["allowed"] is True


def test_patch_escapes_label_keys_and_creates_missing_labels_map(lookup: InMemoryLookup) -> None:
    patch = decode_patch(mutate_job(request(job(None)), lookup))
    assert patch[0] == {
        "op": "add",
        "path": "/metadata/labels",
        "value": {Q: "default", CQ: "cq-default"},
    }
    patch = decode_patch(mutate_job(request(job({"x": "y"})), lookup))
    assert {
        "op": "add",
        "path": "/metadata/labels/queuectl.io~1queue-name",
        "value": "default",
    } in (patch)


def test_queue_change_on_update_re_derives_the_cluster_queue(lookup: InMemoryLookup) -> None:
    lookup.local_queues[(NS, "cpu")] = "cq-cpu"
    old = job({Q: "gpu", CQ: "cq-a"}, suspend=True)
    new = job({Q: "cpu", CQ: "cq-a"}, suspend=True)
    out = mutated(mutate_job(request(new, old=old), lookup), new)
    assert out["metadata"]["labels"] == {Q: "cpu", CQ: "cq-cpu"}
    assert out["spec"]["suspend"] is True


@pytest.mark.parametrize(
    ("scenario", "old", "new"),
    [
        ("unrelated update", job({Q: "gpu", CQ: "cq-a"}, True), job({Q: "gpu", CQ: "cq-a"}, False)),
        ("new queue unknown", job({Q: "gpu", CQ: "cq-a"}, True), job({Q: "zzz", CQ: "cq-a"}, True)),
        ("label removed", job({Q: "gpu", CQ: "cq-a"}, True), job({}, True)),
    ],
)
def test_update_never_suspends_or_guesses(
    lookup: InMemoryLookup, scenario: str, old: dict[str, Any], new: dict[str, Any]
) -> None:
    assert "patch" not in mutate_job(request(new, old=old), lookup), scenario


label_values = st.sampled_from(["gpu", "default", "nope", "cq-a", "cq-evil", "x"])
label_maps = st.dictionaries(
    st.sampled_from([Q, CQ, "app", names.LABEL_PRIORITY_CLASS]), label_values, max_size=4
)


@settings(
    max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    labels=st.none() | label_maps,
    suspend=st.sampled_from([None, True, False]),
    namespace=st.sampled_from([NS, "team-b"]),
)
def test_mutation_is_idempotent(
    lookup: InMemoryLookup, labels: dict[str, str] | None, suspend: bool | None, namespace: str
) -> None:
    """Applying the webhook to its own output changes nothing (reinvocation is safe)."""
    obj = job(labels, suspend)
    once = mutated(mutate_job(request(obj, namespace=namespace), lookup), obj)
    again = mutate_job(request(once, namespace=namespace), lookup)
    assert decode_patch(again) == []
    if (once["metadata"].get("labels") or {}).get(Q) is not None:
        assert once["spec"]["suspend"] is True, "whatever is queued is suspended"


PC = names.LABEL_PRIORITY_CLASS


@pytest.mark.parametrize(
    ("scenario", "labels", "old_labels", "warns"),
    [
        ("create, class exists", {Q: "gpu", PC: "urgent"}, None, False),
        ("create, class missing", {Q: "gpu", PC: "urgnet"}, None, True),
        ("create, malformed: the validator refuses it", {Q: "gpu", PC: "Bad_Name"}, None, False),
        ("relabel to a missing class", {Q: "gpu", PC: "urgnet"}, {Q: "gpu", PC: "urgent"}, True),
        ("class label unchanged", {Q: "gpu", PC: "urgnet"}, {Q: "gpu", PC: "urgnet"}, False),
        ("class label removed", {Q: "gpu"}, {Q: "gpu", PC: "urgent"}, False),
    ],
)
def test_a_missing_priority_class_is_a_warning_that_says_the_job_waits(
    lookup: InMemoryLookup,
    scenario: str,
    labels: dict[str, str],
    old_labels: dict[str, str] | None,
    warns: bool,
) -> None:
    """Not a refusal: a class applied with the Job in one `kubectl apply` may not have reached
    the controller's cache yet; the Job then simply waits for it."""
    lookup.priority_classes.add("urgent")
    new = job(labels, True)
    old = None if old_labels is None else job(old_labels, True)
    response = mutate_job(request(new, old=old, operation="UPDATE" if old else "CREATE"), lookup)
    expected = [
        "WorkloadPriorityClass urgnet does not exist; the Job waits until it is created "
        f"(`kubectl get workloadpriorityclasses` lists them) or its {PC} label names an "
        "existing class or is removed"
    ]
    assert response.get("warnings") == (expected if warns else None), scenario
