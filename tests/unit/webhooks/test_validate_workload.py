"""Only the controller writes a Workload's status; an admitted Workload keeps its shape."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from webhook_cases import NS, request

from queuectl.api import names
from queuectl.webhooks.configs import controller_username
from queuectl.webhooks.workloads import validate_workload

WORKLOAD_KIND = {"group": names.GROUP, "version": names.VERSION, "kind": "Workload"}
CONTROLLER = controller_username("queuectl-elsewhere")
ADMISSION = {"clusterQueue": "cq-a", "podSetAssignments": [{"name": "main", "count": 1}]}


def workload(admitted: bool = False, count: int = 1, queue: str = "gpu") -> dict[str, Any]:
    obj: dict[str, Any] = {
        "apiVersion": names.API_VERSION,
        "kind": "Workload",
        "metadata": {"name": "job-train-1a2b3", "namespace": NS},
        "spec": {"queueName": queue, "podSets": [{"name": "main", "count": count}]},
    }
    if admitted:
        obj["status"] = {
            "admission": copy.deepcopy(ADMISSION),
            "conditions": [{"type": names.COND_QUOTA_RESERVED, "status": "True"}],
        }
    return obj


def with_conditions(obj: dict[str, Any], **conditions: str) -> dict[str, Any]:
    obj = copy.deepcopy(obj)
    obj.setdefault("status", {})["conditions"] = [
        {"type": kind, "status": status} for kind, status in conditions.items()
    ]
    return obj


def decide(new: Any, old: Any = None, user: str = "alice", sub: str | None = None) -> Any:
    req = request(new, old, kind=WORKLOAD_KIND, user=user)
    if sub:
        req["subResource"] = sub
    return validate_workload(req, {CONTROLLER})


@pytest.mark.parametrize(
    ("scenario", "new", "old", "sub", "refusal"),
    [
        ("plain create", workload(), None, None, None),
        ("create claiming admission", workload(admitted=True), None, None, "cannot carry a status"),
        (
            "create claiming Admitted",
            with_conditions(workload(), Admitted="True"),
            None,
            None,
            "cannot carry a status",
        ),
        (
            "status write adding an admission",
            workload(admitted=True),
            workload(),
            "status",
            "status cannot be changed by hand",
        ),
        (
            "status write flipping QuotaReserved",
            with_conditions(workload(), QuotaReserved="True"),
            with_conditions(workload(), QuotaReserved="False"),
            "status",
            "status cannot be changed by hand",
        ),
        (
            "status write removing an admission",
            workload(),
            workload(admitted=True),
            "status",
            "status cannot be changed by hand",
        ),
        (
            "scaling an admitted Workload",
            workload(admitted=True, count=8),
            workload(admitted=True),
            None,
            "spec.podSets cannot change while the Workload is admitted",
        ),
        (
            "moving an admitted Workload",
            workload(admitted=True, queue="other"),
            workload(admitted=True),
            None,
            "spec.queueName cannot change",
        ),
        ("scaling a pending Workload", workload(count=8), workload(), None, None),
        (
            "deactivating an admitted Workload",
            workload(admitted=True) | {"spec": workload()["spec"] | {"active": False}},
            workload(admitted=True),
            None,
            None,
        ),
        (
            "marking a running Workload Finished to free its quota",
            with_conditions(workload(admitted=True), QuotaReserved="True", Finished="True"),
            workload(admitted=True),
            "status",
            "status cannot be changed by hand",
        ),
        (
            "clearing an eviction",
            with_conditions(workload(admitted=True), QuotaReserved="True"),
            with_conditions(workload(admitted=True), QuotaReserved="True", Evicted="True"),
            "status",
            "status cannot be changed by hand",
        ),
        (
            "an AdmissionCheck controller reporting its check",
            workload(admitted=True)
            | {
                "status": workload(admitted=True)["status"]
                | {"admissionChecks": [{"name": "prov", "state": "Ready"}]}
            },
            workload(admitted=True),
            "status",
            None,
        ),
    ],
)
def test_users_cannot_claim_or_reshape_an_admission(
    scenario: str, new: Any, old: Any, sub: str | None, refusal: str | None
) -> None:
    answer = decide(new, old, sub=sub)
    if refusal is None:
        assert answer["allowed"] is True, scenario
    else:
        assert answer["allowed"] is False, scenario
        assert refusal in answer["status"]["message"], scenario
        assert f"Workload {NS}/job-train-1a2b3" in answer["status"]["message"], scenario


@pytest.mark.parametrize(
    ("new", "old", "sub"),
    [
        (workload(admitted=True), workload(), "status"),
        (workload(admitted=True, count=8), workload(admitted=True), None),
        (workload(admitted=True), None, None),
    ],
)
def test_the_configured_controller_identity_may_do_anything(new: Any, old: Any, sub: Any) -> None:
    assert decide(new, old, user=CONTROLLER, sub=sub)["allowed"] is True
    default_identity = controller_username()
    assert decide(new, old, user=default_identity, sub=sub)["allowed"] is False, (
        "the identity comes from configuration, not from the default namespace"
    )
