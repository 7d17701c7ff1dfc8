"""The typed views read raw objects as the API server sends them: missing sections read as
empty, nothing is copied, and the Workload predicates say what the controller decides by."""

from __future__ import annotations

from typing import Any

import pytest

from queuectl.api import names
from queuectl.api.resource import PODS, WORKLOADS, Resource
from queuectl.api.views import ObjectView, WorkloadView, owner_reference


def cond(type_: str, status: str = "True", reason: str = "") -> dict[str, Any]:
    return {"type": type_, "status": status, "reason": reason}


def workload(*conditions: dict[str, Any], admission: bool = True, **spec: Any) -> dict[str, Any]:
    status: dict[str, Any] = {"conditions": list(conditions)}
    if admission:
        status["admission"] = {"clusterQueue": "cq", "podSetAssignments": []}
    return {
        "metadata": {"name": "train", "namespace": "team-a", "uid": "u1"},
        "spec": spec,
        "status": status,
    }


# --- any object -------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("scenario", "raw"),
    [
        ("an empty object", {}),
        ("null sections, as a sparse patch answer has them", {"metadata": None, "status": None}),
        ("empty metadata", {"metadata": {}, "spec": {}, "status": {}}),
    ],
)
def test_missing_sections_read_as_empty(scenario: str, raw: dict[str, Any]) -> None:
    view = ObjectView(raw)
    assert (view.meta, view.spec, view.status) == ({}, {}, {}), scenario
    assert (view.name, view.namespace, view.uid) == ("", "", ""), scenario
    assert (dict(view.labels), dict(view.annotations)) == ({}, {}), scenario
    assert (tuple(view.owner_refs), view.controller_ref) == ((), None), scenario
    assert (tuple(view.conditions), view.true_conditions) == ((), {}), scenario
    assert view.condition("Ready") is None and not view.is_true("Ready"), scenario
    assert not view.deleting, scenario


def test_a_view_reads_the_dict_it_wraps_not_a_copy() -> None:
    raw: dict[str, Any] = {"metadata": {"name": "a", "labels": {"team": "a"}}}
    view = ObjectView(raw)
    raw["metadata"]["labels"]["team"] = "b"
    assert view.labels["team"] == "b"
    assert view.meta is raw["metadata"]


def test_metadata_fields() -> None:
    view = ObjectView(
        {
            "metadata": {
                "name": "train",
                "namespace": "team-a",
                "uid": "u1",
                "labels": {names.LABEL_QUEUE_NAME: "gpu"},
                "annotations": {names.ANNOTATION_POD_SET: "main", "count": 3},
                "deletionTimestamp": "2026-01-01T00:00:00Z",
            }
        }
    )
    assert (view.name, view.namespace, view.uid, view.key) == (
        "train",
        "team-a",
        "u1",
        "team-a/train",
    )
    assert view.labels == {names.LABEL_QUEUE_NAME: "gpu"}
    assert view.annotation(names.ANNOTATION_POD_SET) == "main"
    assert view.annotation("count") == "3"  # a value as the API would print it
    assert view.annotation("absent") is None
    assert view.deleting


@pytest.mark.parametrize(
    ("meta", "key"),
    [
        ({"name": "node-1"}, "/node-1"),  # cluster-scoped
        ({"name": "train", "namespace": "team-a"}, "team-a/train"),
    ],
)
def test_key(meta: dict[str, Any], key: str) -> None:
    assert ObjectView({"metadata": meta}).key == key


def test_a_nameless_object_has_no_key() -> None:
    with pytest.raises(KeyError):
        ObjectView({"metadata": {"namespace": "a"}}).key  # noqa: B018


@pytest.mark.parametrize(
    ("scenario", "refs", "controller"),
    [
        ("no owners", [], None),
        ("an owner that does not control it", [{"name": "a"}], None),
        ("controller: false", [{"name": "a", "controller": False}], None),
        (
            "the one controller among owners",
            [{"name": "a"}, {"name": "b", "controller": True}],
            "b",
        ),
    ],
)
def test_controller_ref(scenario: str, refs: list[dict[str, Any]], controller: str | None) -> None:
    view = ObjectView({"metadata": {"ownerReferences": refs}})
    assert list(view.owner_refs) == refs, scenario
    found = view.controller_ref
    assert (None if found is None else found["name"]) == controller, scenario


def test_conditions_by_type() -> None:
    view = ObjectView(
        {
            "status": {
                "conditions": [
                    cond("Complete", "False"),
                    cond("Failed", "True", "BackoffLimitExceeded"),
                    cond("Suspended", "Unknown"),
                ]
            }
        }
    )
    assert view.condition("Complete") == cond("Complete", "False")
    assert not view.is_true("Complete") and view.is_true("Failed")
    assert not view.is_true("Suspended") and not view.is_true("Absent")
    assert view.true_conditions == {"Failed": cond("Failed", "True", "BackoffLimitExceeded")}


# --- Workloads --------------------------------------------------------------------------------
QR, ADM, FIN = names.COND_QUOTA_RESERVED, names.COND_ADMITTED, names.COND_FINISHED


@pytest.mark.parametrize(
    ("scenario", "raw", "holds", "admitted"),
    [
        ("pending: no condition, no admission", workload(admission=False), False, False),
        ("reserved, checks pending", workload(cond(QR)), True, False),
        ("reserved and admitted", workload(cond(QR), cond(ADM)), True, True),
        (
            "admitted, then finished: the quota is free",
            workload(cond(QR), cond(ADM), cond(FIN)),
            False,
            False,
        ),
        (
            "QuotaReserved without an admission on record",
            workload(cond(QR), admission=False),
            False,
            False,
        ),
        (
            "an admission left after QuotaReserved turned False",
            workload(cond(QR, "False")),
            False,
            False,
        ),
        ("Admitted alone is not a reservation", workload(cond(ADM)), False, False),
    ],
)
def test_holds_quota_and_is_admitted(
    scenario: str, raw: dict[str, Any], holds: bool, admitted: bool
) -> None:
    view = WorkloadView(raw)
    assert view.holds_quota is holds, scenario
    assert view.is_admitted is admitted, scenario


@pytest.mark.parametrize(
    ("scenario", "requeued", "front"),
    [
        ("never requeued", None, False),
        (
            "requeued for node failures",
            cond(names.COND_REQUEUED, "True", names.REASON_EVICTED_NODE_FAILURES),
            True,
        ),
        (
            "requeued after preemption",
            cond(names.COND_REQUEUED, "True", names.REASON_EVICTED_PREEMPTION),
            False,
        ),
        (
            "admitted again since",
            cond(names.COND_REQUEUED, "False", names.REASON_EVICTED_NODE_FAILURES),
            False,
        ),
    ],
)
def test_a_workload_requeued_for_node_failures_goes_first(
    scenario: str, requeued: dict[str, Any] | None, front: bool
) -> None:
    raw = workload(*([] if requeued is None else [requeued]), admission=False)
    assert WorkloadView(raw).requeued_for_node_failure is front, scenario


def test_workload_spec_fields() -> None:
    pod_sets = [{"name": "main", "count": 2}]
    view = WorkloadView(workload(cond(QR), queueName="gpu", podSets=pod_sets))
    assert view.queue_name == "gpu"
    assert view.pod_sets is pod_sets
    assert view.admission == {"clusterQueue": "cq", "podSetAssignments": []}
    bare = WorkloadView({"metadata": {"name": "w"}})
    assert (bare.queue_name, bare.pod_sets, bare.admission) == ("", [], None)


# --- owner references -------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("scenario", "resource", "kw", "extra"),
    [
        ("a Job's Workload: the Job controls it", WORKLOADS, {}, {"controller": True}),
        ("a single pod's Workload", PODS, {}, {"controller": True}),
        (
            "placeholders go with their Workload, never blocking its deletion",
            WORKLOADS,
            {"controller": None, "block_owner_deletion": False},
            {"blockOwnerDeletion": False},
        ),
    ],
)
def test_owner_reference(
    scenario: str, resource: Resource, kw: dict[str, Any], extra: dict[str, Any]
) -> None:
    owner = {"metadata": {"name": "train", "namespace": "team-a", "uid": "u1"}}
    assert owner_reference(owner, resource, **kw) == {
        "apiVersion": resource.api_version,
        "kind": resource.kind,
        "name": "train",
        "uid": "u1",
        **extra,
    }, scenario
