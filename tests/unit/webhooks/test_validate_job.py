"""Job create/update: the validating webhook keeps queued Jobs from escaping the queue."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from webhook_cases import NS, job, request

from queuectl.api import names
from queuectl.webhooks.jobs import validate_job
from queuectl.webhooks.lookup import InMemoryLookup

Q, CQ, PC, MAX = (
    names.LABEL_QUEUE_NAME,
    names.LABEL_CLUSTER_QUEUE,
    names.LABEL_PRIORITY_CLASS,
    names.LABEL_MAX_EXEC_TIME,
)
QUEUED = {Q: "gpu", CQ: "cq-a"}


def queued(suspend: bool = True, **extra: str) -> dict[str, Any]:
    return job({**QUEUED, **extra}, suspend)


def refusal(response: dict[str, Any]) -> str:
    assert response["allowed"] is False, "expected a refusal"
    assert response["status"]["code"] == 403
    message: str = response["status"]["message"]
    assert message.startswith(f"Job {NS}/train: ")
    return message


def test_unsuspending_an_unadmitted_job_by_hand_is_refused(lookup: InMemoryLookup) -> None:
    message = refusal(validate_job(request(queued(False), old=queued(True)), lookup))
    assert message == (
        f"Job {NS}/train: it is queued in LocalQueue 'gpu' and not admitted yet, so it cannot be "
        "unsuspended by hand; queuectl unsuspends it once quota is available (see why it waits "
        f"with `kubectl get workloads -n {NS}` or `queuectl describe job train -n {NS}`)"
    )


@pytest.mark.parametrize(
    ("scenario", "admitted", "user"),
    [
        ("workload admitted (controller cache)", True, "alice"),
        ("the controller itself, cache lagging", False, names.CONTROLLER_USERNAME),
    ],
)
def test_unsuspend_is_allowed_once_admitted_or_by_the_controller(
    lookup: InMemoryLookup, scenario: str, admitted: bool, user: str
) -> None:
    if admitted:
        lookup.admitted_jobs.add((NS, "train"))
    response = validate_job(request(queued(False), old=queued(True), user=user), lookup)
    assert response["allowed"] is True, scenario


def test_a_custom_controller_identity_is_honoured(lookup: InMemoryLookup) -> None:
    req = request(queued(False), old=queued(True), user="kubernetes-admin")
    assert validate_job(req, lookup)["allowed"] is False
    assert validate_job(req, lookup, controller_users={"kubernetes-admin"})["allowed"] is True


@pytest.mark.parametrize(
    ("scenario", "old", "new", "admitted", "fragment"),
    [
        (
            "relabel while admitted",
            queued(False),
            job({Q: "cpu", CQ: "cq-a"}, False),
            True,
            "cannot change from 'gpu' to 'cpu' while the Job is admitted",
        ),
        (
            "relabel while running though cache says not admitted",
            queued(False),
            job({Q: "cpu", CQ: "cq-a"}, False),
            False,
            "cannot change from 'gpu' to 'cpu'",
        ),
        (
            "relabel while admitted but suspended for preemption",
            queued(True),
            job({Q: "cpu", CQ: "cq-a"}, True),
            True,
            "cannot change",
        ),
        (
            "queue label removed",
            queued(True),
            job({CQ: "cq-a"}, True),
            False,
            "cannot be removed from a queued Job; to run it outside queuectl, delete the Job",
        ),
        (
            "queue label added to a running Job",
            job({}, False),
            job({Q: "gpu"}, False),
            False,
            "can only be added to a suspended Job",
        ),
        (
            "cluster-queue label edited by a user",
            queued(True),
            job({Q: "gpu", CQ: "cq-all"}, True),
            False,
            f"label {CQ} is set by queuectl from the LocalQueue",
        ),
        (
            "cluster-queue label removed by a user",
            queued(True),
            job({Q: "gpu"}, True),
            False,
            f"label {CQ} is set by queuectl",
        ),
        (
            "workload label forged",
            queued(True),
            queued(True, **{names.LABEL_WORKLOAD: "someone-elses"}),
            False,
            f"label {names.LABEL_WORKLOAD} is managed by queuectl",
        ),
        (
            "preemption deadline pushed back",
            job(QUEUED, False, annotations={names.ANNOTATION_PREEMPTION_DEADLINE: "t1"}),
            job(QUEUED, False, annotations={names.ANNOTATION_PREEMPTION_DEADLINE: "t2"}),
            True,
            f"annotation {names.ANNOTATION_PREEMPTION_DEADLINE} is managed by queuectl",
        ),
        (
            "malformed priority class introduced",
            queued(True),
            queued(True, **{PC: "Prod_1"}),
            False,
            f"label {PC}='Prod_1' is not a valid WorkloadPriorityClass name",
        ),
    ],
)
def test_updates_that_bypass_the_queue_are_refused(
    lookup: InMemoryLookup,
    scenario: str,
    old: dict[str, Any],
    new: dict[str, Any],
    admitted: bool,
    fragment: str,
) -> None:
    if admitted:
        lookup.admitted_jobs.add((NS, "train"))
    assert fragment in refusal(validate_job(request(new, old=old), lookup)), scenario


@pytest.mark.parametrize(
    ("scenario", "old", "new"),
    [
        ("move to another queue while waiting", queued(True), job({Q: "gpu2", CQ: "cq-a"}, True)),
        (
            "move with a coherent cluster-queue label",
            queued(True),
            job({Q: "default", CQ: "cq-default"}, True),
        ),
        ("anyone may suspend", queued(False), queued(True)),
        ("unrelated edit of a running Job", queued(False), queued(False, app="v2")),
        (
            "pre-existing malformed label kept",
            queued(True, **{MAX: "soon"}),
            queued(True, **{MAX: "soon"}, x="y"),
        ),
        ("priority change while waiting", queued(True), queued(True, **{PC: "production"})),
        ("unlabelled Job untouched", job({}, False), job({}, True)),
    ],
)
def test_ordinary_updates_are_allowed(
    lookup: InMemoryLookup, scenario: str, old: dict[str, Any], new: dict[str, Any]
) -> None:
    assert validate_job(request(new, old=old), lookup)["allowed"] is True, scenario


def test_a_job_being_deleted_may_shed_its_finalizers(lookup: InMemoryLookup) -> None:
    new = queued(False)
    new["metadata"]["deletionTimestamp"] = "2030-01-01T00:00:00Z"
    assert validate_job(request(new, old=queued(True)), lookup)["allowed"] is True


@pytest.mark.parametrize(
    ("scenario", "labels", "suspend", "fragments"),
    [
        (
            "queue name not DNS-1123",
            {Q: "Team_A"},
            True,
            [f"label {Q}='Team_A' is not a valid LocalQueue name"],
        ),
        (
            "max exec time not a positive integer",
            {Q: "gpu", MAX: "0"},
            True,
            [f"label {MAX}='0' must be a whole number of seconds between 1 and"],
        ),
        (
            "every problem reported at once",
            {Q: "gpu", MAX: "1h", PC: "-x"},
            False,
            [f"{MAX}='1h'", f"{PC}='-x'", "must be created with spec.suspend=true"],
        ),
        (
            "cluster-queue label contradicts the LocalQueue",
            {Q: "gpu", CQ: "cq-evil"},
            True,
            [f"label {CQ}='cq-evil' does not match LocalQueue 'gpu'", "ClusterQueue 'cq-a'"],
        ),
        (
            "workload label set by the user",
            {**QUEUED, names.LABEL_WORKLOAD: "w"},
            True,
            [f"label {names.LABEL_WORKLOAD} is set by queuectl only"],
        ),
        (
            "created running (mutating webhook missing)",
            QUEUED,
            False,
            [f"MutatingWebhookConfiguration {names.MUTATING_WEBHOOK_CONFIGURATION} exists"],
        ),
    ],
)
def test_bad_creates_are_refused_with_every_problem(
    lookup: InMemoryLookup,
    scenario: str,
    labels: dict[str, str],
    suspend: bool,
    fragments: list[str],
) -> None:
    message = refusal(validate_job(request(job(labels, suspend)), lookup))
    for fragment in fragments:
        assert fragment in message, scenario


@pytest.mark.parametrize(
    ("scenario", "labels"),
    [
        ("queued and well formed", {**QUEUED, PC: "production", MAX: "3600"}),
        ("queue missing from cache", {Q: "brand-new"}),
        ("cluster-queue label on a queue the cache lacks", {Q: "brand-new", CQ: "cq-x"}),
    ],
)
def test_good_creates_are_allowed(
    lookup: InMemoryLookup, scenario: str, labels: dict[str, str]
) -> None:
    assert validate_job(request(job(labels, True)), lookup)["allowed"] is True, scenario


def test_unlabelled_and_foreign_requests_are_allowed(lookup: InMemoryLookup) -> None:
    assert validate_job(request(job(None, False)), lookup)["allowed"] is True
    pod = request(job(QUEUED, False), kind={"group": "", "version": "v1", "kind": "Pod"})
    assert validate_job(pod, lookup)["allowed"] is True


label_values = st.sampled_from(["gpu", "cpu", "default", "cq-a", "cq-default", "Bad_Value", "60"])
label_maps = st.dictionaries(
    st.sampled_from([Q, CQ, PC, MAX, names.LABEL_WORKLOAD, "app"]), label_values
)


@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    old_labels=label_maps,
    new_labels=label_maps,
    old_suspend=st.booleans(),
    new_suspend=st.booleans(),
    admitted=st.booleans(),
)
def test_no_user_edit_lets_a_queued_job_escape_the_queue(
    lookup: InMemoryLookup,
    old_labels: dict[str, str],
    new_labels: dict[str, str],
    old_suspend: bool,
    new_suspend: bool,
    admitted: bool,
) -> None:
    """Whatever a user changes: a queued Job stays queued, and runs only if admitted."""
    lookup.admitted_jobs.clear()
    if admitted:
        lookup.admitted_jobs.add((NS, "train"))
    old, new = job({**old_labels, Q: "gpu"}, old_suspend), job(new_labels, new_suspend)
    if not validate_job(request(new, old=old), lookup)["allowed"]:
        return
    assert new_labels.get(Q) is not None, "the queue label was removed"
    if old_suspend and not new_suspend:
        assert admitted, "an unadmitted Job was unsuspended"
    if admitted or not old_suspend:
        assert new_labels[Q] == "gpu", "the queue changed under an admitted or running Job"
    assert new_labels.get(names.LABEL_WORKLOAD) == old_labels.get(names.LABEL_WORKLOAD)


def test_a_queued_job_with_an_invalid_pod_set_group_name_is_refused_with_the_fix(
    lookup: InMemoryLookup,
) -> None:
    bad = queued()
    bad["spec"]["template"]["metadata"] = {
        "annotations": {
            names.ANNOTATION_PODSET_REQUIRED_TOPOLOGY: "topology.queuectl.io/rack",
            names.ANNOTATION_PODSET_GROUP_NAME: "My_Group",
        }
    }
    message = refusal(validate_job(request(bad), lookup))
    assert "annotation queuectl.io/podset-group-name='My_Group' is not a valid" in message
    bad["spec"]["template"]["metadata"]["annotations"][names.ANNOTATION_PODSET_GROUP_NAME] = "ddp"
    assert validate_job(request(bad), lookup)["allowed"] is True
