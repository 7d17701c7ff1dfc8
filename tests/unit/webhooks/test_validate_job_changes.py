"""Job updates that would run more than was admitted, and priority classes a namespace may not use.

Issue 12, findings 1 and 9: a queued Job's shape (pods at once, requests, topology) is fixed while
it holds quota; waiting, it may change (the controller resizes its Workload, and a warning says
so). A WorkloadPriorityClass with a namespaceSelector may only be named in the namespaces it
selects, on create and on every relabel, admitted or not.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from webhook_cases import NS, job, request

from queuectl.api import names
from queuectl.jobs.batch import pod_count as pods_at_once
from queuectl.webhooks.jobs import validate_job
from queuectl.webhooks.lookup import InMemoryLookup

Q, CQ, PC = names.LABEL_QUEUE_NAME, names.LABEL_CLUSTER_QUEUE, names.LABEL_PRIORITY_CLASS
GPU = names.GPU_RESOURCE


def gpu_job(
    parallelism: int = 1,
    completions: int | None = 8,
    gpus: str = "2",
    suspend: bool = True,
    labels: dict[str, str] | None = None,
    topology: str | None = None,
) -> dict[str, Any]:
    """The issue's Job: `parallelism` pods of `gpus` GPUs at once, queued in `gpu`."""
    out = job({Q: "gpu", CQ: "cq-a", **(labels or {})}, suspend)
    out["spec"]["parallelism"] = parallelism
    if completions is not None:
        out["spec"]["completions"] = completions
    (container,) = out["spec"]["template"]["spec"]["containers"]
    container["resources"] = {"requests": {GPU: gpus}, "limits": {GPU: gpus}}
    if topology:
        annotations = {names.ANNOTATION_PODSET_REQUIRED_TOPOLOGY: topology}
        out["spec"]["template"]["metadata"] = {"annotations": annotations}
    return out


def scaled(old: dict[str, Any], **spec: Any) -> dict[str, Any]:
    new = copy.deepcopy(old)
    new["spec"].update(spec)
    return new


def refusal(response: dict[str, Any]) -> str:
    assert response["allowed"] is False, "expected a refusal"
    assert response["status"]["code"] == 403
    message: str = response["status"]["message"]
    return message


WAITING, RUNNING = gpu_job(), gpu_job(suspend=False)


@pytest.mark.parametrize(
    ("scenario", "old", "new", "admitted", "fragment"),
    [
        (
            "the issue: scaled from 1 to 8 pods while admitted",
            RUNNING,
            scaled(RUNNING, parallelism=8),
            True,
            "it cannot change the pods it runs at once (parallelism, at most completions) from "
            "1 to 8 while it is admitted: the quota it holds was sized for its shape",
        ),
        (
            "scaled while running though the cache says not admitted",
            RUNNING,
            scaled(RUNNING, parallelism=8),
            False,
            "from 1 to 8 while it is admitted",
        ),
        (
            "admitted, not started yet (suspended), scaled",
            WAITING,
            scaled(WAITING, parallelism=8),
            True,
            "from 1 to 8 while it is admitted",
        ),
        (
            "scaled down while admitted",
            gpu_job(4, suspend=False),
            scaled(gpu_job(4, suspend=False), parallelism=2),
            True,
            "from 4 to 2 while it is admitted",
        ),
        (
            "more GPUs per pod while admitted",
            RUNNING,
            gpu_job(gpus="8", suspend=False),
            True,
            "it cannot change the resources its pod template requests while it is admitted",
        ),
        (
            "topology request changed while admitted",
            gpu_job(suspend=False, topology="rack"),
            gpu_job(suspend=False, topology="block"),
            True,
            "it cannot change its pod template's topology request while it is admitted",
        ),
    ],
)
def test_an_admitted_job_keeps_its_shape(
    lookup: InMemoryLookup,
    scenario: str,
    old: dict[str, Any],
    new: dict[str, Any],
    admitted: bool,
    fragment: str,
) -> None:
    if admitted:
        lookup.admitted_jobs.add((NS, "train"))
    message = refusal(validate_job(request(new, old=old), lookup))
    assert message.startswith(f"Job {NS}/train: "), scenario
    assert fragment in message, scenario
    assert "delete it and create it again with the new shape" in message, scenario


def test_a_waiting_job_may_change_shape_and_is_told_its_workload_follows(
    lookup: InMemoryLookup,
) -> None:
    response = validate_job(request(scaled(WAITING, parallelism=8), old=WAITING), lookup)
    assert response["allowed"] is True
    assert response["warnings"] == [
        "this changes the pods it runs at once (parallelism, at most completions) from 1 to 8: "
        "queuectl resizes the Job's Workload, which waits in LocalQueue 'gpu' for quota for its "
        "new shape"
    ]


@pytest.mark.parametrize(
    ("scenario", "old", "new", "user"),
    [
        (
            "parallelism beyond completions: the same pods at once",
            gpu_job(8, 8, suspend=False),
            scaled(gpu_job(8, 8, suspend=False), parallelism=16),
            "alice",
        ),
        (
            "unrelated change of an admitted Job",
            RUNNING,
            gpu_job(suspend=False, labels={"a": "b"}),
            "alice",
        ),
        (
            "the controller itself",
            RUNNING,
            scaled(RUNNING, parallelism=8),
            names.CONTROLLER_USERNAME,
        ),
    ],
)
def test_changes_that_keep_the_shape_or_come_from_the_controller_are_allowed(
    lookup: InMemoryLookup, scenario: str, old: dict[str, Any], new: dict[str, Any], user: str
) -> None:
    lookup.admitted_jobs.add((NS, "train"))
    response = validate_job(request(new, old=old, user=user), lookup)
    assert response["allowed"] is True, scenario
    assert "warnings" not in response, scenario


@settings(
    max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    parallelism=st.tuples(st.integers(0, 9), st.integers(0, 9)),
    completions=st.tuples(st.none() | st.integers(1, 9), st.none() | st.integers(1, 9)),
    gpus=st.tuples(st.sampled_from(["1", "2"]), st.sampled_from(["1", "2"])),
    suspend=st.tuples(st.booleans(), st.booleans()),
    admitted=st.booleans(),
)
def test_no_user_edit_makes_an_admitted_or_running_job_use_other_quota(
    lookup: InMemoryLookup,
    parallelism: tuple[int, int],
    completions: tuple[int | None, int | None],
    gpus: tuple[str, str],
    suspend: tuple[bool, bool],
    admitted: bool,
) -> None:
    """Whatever a user changes: once admitted (or running) the pods at once and their requests
    are those its quota was sized for."""
    lookup.admitted_jobs.clear()
    if admitted:
        lookup.admitted_jobs.add((NS, "train"))
    old = gpu_job(parallelism[0], completions[0], gpus[0], suspend[0])
    new = gpu_job(parallelism[1], completions[1], gpus[1], suspend[1])
    if not validate_job(request(new, old=old), lookup)["allowed"]:
        return
    if admitted or not suspend[0]:
        assert pods_at_once(new) == pods_at_once(old)
        assert gpus[0] == gpus[1]


@pytest.mark.parametrize(
    ("scenario", "old", "admitted", "refusal_says"),
    [
        ("waiting: the controller moves its Workload", WAITING, False, None),
        ("admitted, not started yet", WAITING, True, "cannot change from 'gpu' to 'cpu'"),
        ("running", RUNNING, False, "cannot change from 'gpu' to 'cpu'"),
    ],
)
def test_a_job_may_move_to_another_queue_only_while_it_waits(
    lookup: InMemoryLookup,
    scenario: str,
    old: dict[str, Any],
    admitted: bool,
    refusal_says: str | None,
) -> None:
    """Finding 3: the label and the Workload never disagree. Waiting, the move is allowed and
    the controller moves the Workload; holding quota, the label is fixed."""
    if admitted:
        lookup.admitted_jobs.add((NS, "train"))
    lookup.local_queues[(NS, "cpu")] = "cq-a"
    new = copy.deepcopy(old)
    new["metadata"]["labels"][Q] = "cpu"
    response = validate_job(request(new, old=old), lookup)
    if refusal_says is None:
        assert response["allowed"] is True, scenario
    else:
        assert refusal_says in refusal(response), scenario


# --- priority classes and namespaces ------------------------------------------------------
@pytest.fixture
def classes(lookup: InMemoryLookup) -> InMemoryLookup:
    """`top` is for team-b only; `team` for namespaces labelled team=a; `public` for all."""
    lookup.priority_class_selectors.update(
        {
            "top": {"matchLabels": {"kubernetes.io/metadata.name": "team-b"}},
            "team": {"matchExpressions": [{"key": "team", "operator": "In", "values": ["a"]}]},
        }
    )
    lookup.priority_classes.add("public")
    return lookup


NOT_HERE = (
    f"WorkloadPriorityClass 'top' may not be used in namespace '{NS}': its namespaceSelector "
    "does not select this namespace; name a class this namespace may use (`kubectl get wpc`), "
    f"remove the {PC} label, or ask a cluster admin to extend the class's namespaceSelector"
)


@pytest.mark.parametrize(
    ("scenario", "old", "new", "admitted"),
    [
        ("created with it", None, gpu_job(labels={PC: "top"}), False),
        ("waiting, relabelled to it", WAITING, gpu_job(labels={PC: "top"}), False),
        (
            "running, relabelled to it",
            gpu_job(suspend=False, labels={PC: "public"}),
            gpu_job(suspend=False, labels={PC: "top"}),
            True,
        ),
    ],
)
def test_a_class_is_refused_outside_the_namespaces_it_selects(
    classes: InMemoryLookup,
    scenario: str,
    old: dict[str, Any] | None,
    new: dict[str, Any],
    admitted: bool,
) -> None:
    if admitted:
        classes.admitted_jobs.add((NS, "train"))
    message = refusal(validate_job(request(new, old=old), classes))
    assert message == f"Job {NS}/train: {NOT_HERE}", scenario


@pytest.mark.parametrize(
    ("scenario", "old", "new", "namespace"),
    [
        ("a class selecting this namespace", None, gpu_job(labels={PC: "team"}), NS),
        ("a class without a selector", None, gpu_job(labels={PC: "public"}), NS),
        ("a class the cache has not seen", None, gpu_job(labels={PC: "new"}), NS),
        ("a namespace the cache lacks, by its name", None, gpu_job(labels={PC: "top"}), "team-b"),
        (
            "a running Job re-prioritised within what its namespace may use",
            gpu_job(suspend=False, labels={PC: "public"}),
            gpu_job(suspend=False, labels={PC: "team"}),
            NS,
        ),
        (
            "a label set before the class was restricted, left as it is",
            gpu_job(suspend=False, labels={PC: "top"}),
            gpu_job(suspend=False, labels={PC: "top", "a": "b"}),
            NS,
        ),
    ],
)
def test_classes_a_namespace_may_use_are_allowed(
    classes: InMemoryLookup,
    scenario: str,
    old: dict[str, Any] | None,
    new: dict[str, Any],
    namespace: str,
) -> None:
    classes.admitted_jobs.add((NS, "train"))
    if namespace != NS:
        del classes.namespaces[namespace]
        for obj in (old, new):
            if obj is not None:
                obj["metadata"]["namespace"] = namespace
        classes.local_queues[(namespace, "gpu")] = "cq-a"
    req = request(new, old=old, namespace=namespace)
    assert validate_job(req, classes)["allowed"] is True, scenario


def test_a_class_closed_to_a_label_is_not_granted_before_the_namespace_is_seen(
    classes: InMemoryLookup,
) -> None:
    """`not-b` is for every namespace but team=b's. A Job in a namespace the cache has not
    seen yet is refused it: only the name label is known, and granting on a guess could hand
    team-b a class closed to it. Once the namespace is seen, team=a may use it."""
    closed = [{"key": "team", "operator": "NotIn", "values": ["b"]}]
    classes.priority_class_selectors["not-b"] = {"matchExpressions": closed}
    new = gpu_job(labels={PC: "not-b"})
    new["metadata"]["namespace"] = "fresh"
    classes.local_queues[("fresh", "gpu")] = "cq-a"
    message = refusal(validate_job(request(new, namespace="fresh"), classes))
    assert "WorkloadPriorityClass 'not-b' may not be used in namespace 'fresh'" in message
    classes.namespaces["fresh"] = {names.LABEL_NAMESPACE_NAME: "fresh", "team": "a"}
    assert validate_job(request(new, namespace="fresh"), classes)["allowed"] is True
