"""Our keys are ours: every label, annotation and gate queuectl writes is refused to anyone but
the controller, on a queued job, in its pod templates, on a child of a queued job and on a pod;
an operator copying its verified parent's template is not refused. (So nobody but the
controller can forge or remove a pod's preemption notice, which its trainer acts on.)

Alice, a plain user of team-a, tries each of queuectl's keys on each object (add, change,
remove); the controller does the same and is let through; the JobSet and Job operators copy
templates that carry the keys into the Jobs and pods they create.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest
from webhook_cases import NS, request

from queuectl.api import names, owned
from queuectl.jobs import podgroup as pg
from queuectl.jobs.batch import JOBS
from queuectl.jobs.jobset import JobSet
from queuectl.jobs.jobset.kind import JOBSETS
from queuectl.webhooks.jobs import mutate_job, validate_job
from queuectl.webhooks.lookup import InMemoryLookup
from queuectl.webhooks.pods import mutate_pod, validate_pod
from queuectl.webhooks.review import decode_patch

Obj = dict[str, Any]
POD_KIND = {"group": "", "version": "v1", "kind": "Pod"}
JOB_KIND = {"group": "batch", "version": "v1", "kind": "Job"}
CONTROLLER = names.CONTROLLER_USERNAME
JOBSET_OPERATOR = "system:serviceaccount:jobset-system:jobset-controller-manager"
JOB_OPERATOR = "system:serviceaccount:kube-system:job-controller"
QUEUED = {names.LABEL_QUEUE_NAME: "gpu", names.LABEL_CLUSTER_QUEUE: "cq-a"}
PARENT = {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "name": "js", "uid": "js-u"}


def container(gpus: str = "1") -> Obj:
    return {"name": "c", "image": "x", "resources": {"requests": {names.GPU_RESOURCE: gpus}}}


def queued_job() -> Obj:
    """A queued Job waiting in LocalQueue gpu."""
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "train", "namespace": NS, "labels": dict(QUEUED)},
        "spec": {
            "suspend": True,
            "parallelism": 4,
            "template": {"spec": {"containers": [container()]}},
        },
    }


def child_job() -> Obj:
    """A Job the JobSet `js` made: it is part of its parent's Workload, not queued itself."""
    out = queued_job()
    out["metadata"] = {
        "name": "js-workers-0",
        "namespace": NS,
        "ownerReferences": [{**PARENT, "controller": True}],
    }
    out["spec"]["suspend"] = False
    return out


def bare_pod() -> Obj:
    """A queued bare pod, admitted and running."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "notebook", "namespace": NS, "labels": dict(QUEUED)},
        "spec": {"containers": [container()]},
    }


def job_pod() -> Obj:
    """A running pod of a queued Job: no queue label of its own (the owned-keys webhook sees
    it because it carries, or is given, one of our keys), e.g. the preemption notice."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "train-0",
            "namespace": NS,
            "ownerReferences": [
                {
                    "apiVersion": "batch/v1",
                    "kind": "Job",
                    "name": "train",
                    "uid": "train-u",
                    "controller": True,
                }
            ],
        },
        "spec": {"containers": [container()], "nodeName": "n1"},
    }


def metadata(obj: Obj) -> Obj:
    return obj["metadata"]


def template_metadata(obj: Obj) -> Obj:
    return obj["spec"]["template"].setdefault("metadata", {})


# (the object, its AdmissionReview kind, where the key goes, the decision)
TARGETS: dict[str, tuple[Callable[[], Obj], dict[str, str], Callable[[Obj], Obj], Any]] = {
    "queued job": (queued_job, JOB_KIND, metadata, validate_job),
    "pod template in a queued job": (queued_job, JOB_KIND, template_metadata, validate_job),
    "child job": (child_job, JOB_KIND, metadata, validate_job),
    "pod template in a child job": (child_job, JOB_KIND, template_metadata, validate_job),
    "pod": (bare_pod, POD_KIND, metadata, validate_pod),
    "pod of a job": (job_pod, POD_KIND, metadata, validate_pod),
}
KEYS = [("labels", k) for k in sorted(owned.OWNED_LABELS)] + [
    ("annotations", k) for k in sorted(owned.OWNED_ANNOTATIONS)
]


def with_key(obj: Obj, where: Callable[[Obj], Obj], field: str, key: str, value: str) -> Obj:
    out = copy.deepcopy(obj)
    where(out).setdefault(field, {})[key] = value
    return out


def edits(make: Callable[[], Obj], where: Callable[[Obj], Obj], field: str, key: str) -> Any:
    """(name, old, new) for adding, changing and removing the key; old None is a CREATE."""
    plain = make()
    first, second = with_key(plain, where, field, key, "a"), with_key(plain, where, field, key, "b")
    return [
        ("create with", None, first),
        ("add", plain, first),
        ("change", first, second),
        ("remove", first, plain),
    ]


CASES = [
    pytest.param(target, field, key, edit, old, new, id=f"{target}: {edit} {key}")
    for target, (make, _, where, _) in TARGETS.items()
    for field, key in KEYS
    for edit, old, new in edits(make, where, field, key)
]


def decide(target: str, old: Obj | None, new: Obj, user: str, lookup: InMemoryLookup) -> Any:
    _, kind, _, decision = TARGETS[target]
    return decision(request(new, old, kind=kind, user=user), lookup)


@pytest.mark.parametrize(("target", "field", "key", "edit", "old", "new"), CASES)
def test_a_plain_user_is_refused_naming_the_key(
    lookup: InMemoryLookup, target: str, field: str, key: str, edit: str, old: Any, new: Obj
) -> None:
    response = decide(target, old, new, "alice", lookup)
    assert response["allowed"] is False
    assert key in response["status"]["message"]


@pytest.mark.parametrize(("target", "field", "key", "edit", "old", "new"), CASES)
def test_the_controller_may(
    lookup: InMemoryLookup, target: str, field: str, key: str, edit: str, old: Any, new: Obj
) -> None:
    assert decide(target, old, new, CONTROLLER, lookup)["allowed"] is True


def test_lifting_our_gate_is_the_controllers_alone_on_any_pod(lookup: InMemoryLookup) -> None:
    gated = bare_pod()
    gated["spec"]["schedulingGates"] = [{"name": pg.GATE}, {"name": "example.com/other"}]
    lifted = copy.deepcopy(gated)
    lifted["spec"]["schedulingGates"] = [{"name": "example.com/other"}]
    for pod in (gated, lifted):  # a pod of a Job carries no queue label: not queued itself
        pod["metadata"]["labels"] = {}
    refused = validate_pod(request(lifted, gated, kind=POD_KIND), lookup)
    assert refused["allowed"] is False and pg.GATE in refused["status"]["message"]
    ok = validate_pod(request(lifted, gated, kind=POD_KIND, user=CONTROLLER), lookup)
    assert ok["allowed"] is True
    other = copy.deepcopy(gated)
    other["spec"]["schedulingGates"] = [{"name": pg.GATE}]
    assert validate_pod(request(other, gated, kind=POD_KIND), lookup)["allowed"] is True


# --- operators copy their parent's template ----------------------------------------------
WORKLOAD = {names.LABEL_WORKLOAD: "jobset-js-1234"}


def jobset(uid: str = "js-u", labels: dict[str, str] | None = None) -> Obj:
    """The JobSet `js` the controller admitted: its template carries the Workload label."""
    template = {"metadata": {"labels": dict(labels or WORKLOAD)}, "spec": {"containers": []}}
    return {
        "metadata": {"name": "js", "namespace": NS, "uid": uid, "labels": dict(QUEUED)},
        "spec": {
            "replicatedJobs": [
                {"name": "workers", "replicas": 1, "template": {"spec": {"template": template}}}
            ]
        },
    }


def copy_of_parent(labels: dict[str, str]) -> Obj:
    child = child_job()
    child["metadata"]["uid"] = "job-u"
    child["spec"]["template"]["metadata"] = {"labels": dict(labels)}
    return child


def pod_of(job: Obj, labels: dict[str, str]) -> Obj:
    ref = {"apiVersion": "batch/v1", "kind": "Job", "name": job["metadata"]["name"]}
    pod = bare_pod()
    pod["metadata"] = {
        "name": "js-workers-0-abcde",
        "namespace": NS,
        "labels": dict(labels),
        "ownerReferences": [{**ref, "uid": job["metadata"]["uid"], "controller": True}],
    }
    return pod


def with_jobset(lookup: InMemoryLookup, js: Obj) -> InMemoryLookup:
    lookup.inputs[(JOBSETS.plural, NS, "js")] = js
    return lookup


def test_the_jobset_operator_copies_its_template_into_a_child_job(
    lookup: InMemoryLookup,
) -> None:
    child = copy_of_parent(WORKLOAD)
    found = with_jobset(lookup, jobset())
    response = validate_job(request(child, kind=JOB_KIND, user=JOBSET_OPERATOR), found)
    assert response["allowed"] is True
    grown = copy.deepcopy(child)  # the JobSet updates a child it resumes: the same copy
    grown["spec"]["template"]["metadata"]["annotations"] = {"example.com/x": "y"}
    update = request(grown, child, kind=JOB_KIND, user=JOBSET_OPERATOR)
    assert validate_job(update, found)["allowed"] is True


@pytest.mark.parametrize(
    ("case", "parent", "labels"),
    [
        ("another value than the parent's", jobset(), {names.LABEL_WORKLOAD: "someone-elses"}),
        ("a parent with another uid (deleted and recreated)", jobset(uid="other"), WORKLOAD),
        ("a parent that carries no such key", jobset(labels={"app": "x"}), WORKLOAD),
        ("a parent the cache does not hold", None, WORKLOAD),
    ],
)
def test_a_copy_that_is_not_the_parents_is_refused(
    lookup: InMemoryLookup, case: str, parent: Obj | None, labels: dict[str, str]
) -> None:
    found = lookup if parent is None else with_jobset(lookup, parent)
    child = copy_of_parent(labels)
    response = validate_job(request(child, kind=JOB_KIND, user=JOBSET_OPERATOR), found)
    assert response["allowed"] is False
    assert names.LABEL_WORKLOAD in response["status"]["message"]


def test_the_job_operator_copies_the_template_into_its_pods(lookup: InMemoryLookup) -> None:
    job = copy_of_parent(WORKLOAD)
    lookup.inputs[(JOBS.plural, NS, job["metadata"]["name"])] = job
    pod = pod_of(job, WORKLOAD)
    assert validate_pod(request(pod, kind=POD_KIND, user=JOB_OPERATOR), lookup)["allowed"]
    forged = pod_of(job, {**WORKLOAD, names.LABEL_PLACEHOLDER_FOR: "wl"})
    refused = validate_pod(request(forged, kind=POD_KIND, user=JOB_OPERATOR), lookup)
    assert refused["allowed"] is False
    assert names.LABEL_PLACEHOLDER_FOR in refused["status"]["message"]


# --- finding: a pod-template annotation shrank the charge ----------------------------------
RDMA = "rdma/hca"


def rdma_job() -> Obj:
    """4 pods of 8 GPUs and 1 RDMA device each, the template claiming RDMA stands in for GPUs."""
    job = queued_job()
    job["spec"]["template"]["metadata"] = {"annotations": {names.ANNOTATION_GPU_RESOURCE: RDMA}}
    job["spec"]["template"]["spec"]["containers"] = [
        {"name": "c", "resources": {"requests": {names.GPU_RESOURCE: "8", RDMA: "1"}}}
    ]
    return job


def test_a_job_cannot_claim_its_gpus_are_served_by_another_device(
    lookup: InMemoryLookup,
) -> None:
    job = rdma_job()
    created = validate_job(request(job, kind=JOB_KIND), lookup)
    assert created["allowed"] is False
    assert names.ANNOTATION_GPU_RESOURCE in created["status"]["message"]
    waiting = queued_job()
    waiting["spec"]["template"]["spec"]["containers"] = job["spec"]["template"]["spec"][
        "containers"
    ]
    updated = validate_job(request(job, waiting, kind=JOB_KIND), lookup)
    assert updated["allowed"] is False
    assert names.ANNOTATION_GPU_RESOURCE in updated["status"]["message"]


# --- finding: a ReplicaSet's queued pod ran outside the queue -------------------------------
def owned_by(kind: str, api_version: str) -> Obj:
    pod = bare_pod()
    ref = {"apiVersion": api_version, "kind": kind, "name": "web", "uid": "u", "controller": True}
    pod["metadata"]["ownerReferences"] = [ref]
    pod["metadata"]["labels"] = {names.LABEL_QUEUE_NAME: "gpu"}
    return pod


@pytest.mark.parametrize(
    ("kind", "api_version"), [("ReplicaSet", "apps/v1"), ("StatefulSet", "apps/v1")]
)
def test_a_pod_of_an_unqueued_controller_is_queued_as_a_plain_pod(
    lookup: InMemoryLookup, kind: str, api_version: str
) -> None:
    pod = owned_by(kind, api_version)
    assert pg.is_queued_pod(pod)
    ops = decode_patch(mutate_pod(request(pod, kind=POD_KIND), lookup))
    assert {"op": "add", "path": "/spec/schedulingGates", "value": [{"name": pg.GATE}]} in ops
    ungated = validate_pod(request(pod, kind=POD_KIND, user="system:serviceaccount:x:rs"), lookup)
    assert ungated["allowed"] is False and pg.GATE in ungated["status"]["message"]


def test_a_pod_of_a_registered_kind_stays_its_owners_business(lookup: InMemoryLookup) -> None:
    pod = owned_by("Job", "batch/v1")
    assert not pg.is_queued_pod(pod)
    assert decode_patch(mutate_pod(request(pod, kind=POD_KIND), lookup)) == []
    assert validate_pod(request(pod, kind=POD_KIND), lookup)["allowed"] is True


def test_a_queued_jobs_mutation_stays_accepted_by_its_validation(lookup: InMemoryLookup) -> None:
    """The mutating webhook writes only keys the validating one lets a user's CREATE carry."""
    job = queued_job()
    job["metadata"]["labels"] = {names.LABEL_QUEUE_NAME: "gpu"}
    job["spec"].pop("suspend")
    out = copy.deepcopy(job)
    for op in decode_patch(mutate_job(request(job, kind=JOB_KIND), lookup)):
        parts = op["path"].split("/")[1:]
        target = out
        for part in parts[:-1]:
            target = target[part.replace("~1", "/")]
        target[parts[-1].replace("~1", "/")] = op["value"]
    assert validate_job(request(out, kind=JOB_KIND), lookup)["allowed"] is True


def test_a_child_may_carry_its_queued_parents_workload_name(lookup: InMemoryLookup) -> None:
    """A TrainJob's placement label sits in its overrides, not in the templates its pod sets
    show: the Workload name of a queued parent is a legitimate copy, of an unqueued one not."""
    parent = jobset(labels={"app": "x"})
    name = JobSet().workload_name(parent)
    child = copy_of_parent({names.LABEL_WORKLOAD: name})
    found = with_jobset(lookup, parent)
    assert validate_job(request(child, kind=JOB_KIND, user=JOBSET_OPERATOR), found)["allowed"]
    parent["metadata"]["labels"] = {}
    refused = validate_job(request(child, kind=JOB_KIND, user=JOBSET_OPERATOR), found)
    assert refused["allowed"] is False
