"""A TrainJob at queuectl's webhooks: created queued it is suspended and its runtime recorded;
a runtime that does not exist is refused by name; the record cannot be forged or edited; the
queue label goes on the TrainJob, not in spec.labels; bypasses are refused as for every kind."""

from __future__ import annotations

import copy
from typing import Any

from queuectl.api import names
from queuectl.jobs.trainjob import CLUSTER_RUNTIMES, TRAIN_JOBS
from queuectl.webhooks.jobs import mutate_job, validate_job
from queuectl.webhooks.lookup import InMemoryLookup
from queuectl.webhooks.review import decode_patch
from tests.unit.jobs.trainjob_cases import created, docs
from tests.unit.webhooks.webhook_cases import apply_patch

NS = "team-a"
RUNTIME = "torch-distributed"
LOOKUP = InMemoryLookup(
    local_queues={(NS, "lq"): "cq-a"},
    inputs={(CLUSTER_RUNTIMES.plural, "", RUNTIME): docs()[RUNTIME]},
)
SNAPSHOT = names.ANNOTATION_TRAINJOB_RUNTIME


def review(obj: dict[str, Any], old: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "uid": "u",
        "kind": {"group": TRAIN_JOBS.group, "version": TRAIN_JOBS.version, "kind": "TrainJob"},
        "operation": "UPDATE" if old is not None else "CREATE",
        "namespace": NS,
        "name": obj["metadata"]["name"],
        "userInfo": {"username": "alice"},
        "object": obj,
        "oldObject": old,
    }


def refusal(obj: dict[str, Any], old: dict[str, Any] | None = None) -> str:
    answer = validate_job(review(obj, old), LOOKUP)
    assert answer["allowed"] is False, answer
    return str(answer["status"]["message"])


def test_a_queued_trainjob_is_created_suspended_with_its_runtime_recorded() -> None:
    job = docs()["pretrain"]
    job["spec"]["suspend"] = False  # the CRD's default, as the webhook receives it
    answer = mutate_job(review(job), LOOKUP)
    made = apply_patch(job, decode_patch(answer))
    assert made["spec"]["suspend"] is True
    assert (
        made["metadata"]["annotations"][SNAPSHOT] == created()["metadata"]["annotations"][SNAPSHOT]
    )
    assert validate_job(review(made), LOOKUP)["allowed"] is True


def test_a_trainjob_whose_runtime_does_not_exist_is_refused_naming_it() -> None:
    job = docs()["pretrain"]
    job["spec"]["runtimeRef"]["name"] = "torch-typo"
    answer = mutate_job(review(job), LOOKUP)
    assert answer["allowed"] is False
    message = answer["status"]["message"]
    assert "ClusterTrainingRuntime 'torch-typo' (spec.runtimeRef) does not exist" in message
    assert "create the runtime first" in message and "kubectl get clustertrainingruntimes" in (
        message
    )


def test_an_unqueued_trainjob_is_left_alone() -> None:
    job = docs()["pretrain"]
    del job["metadata"]["labels"]
    assert "patch" not in mutate_job(review(job), LOOKUP)
    assert validate_job(review(job), LOOKUP)["allowed"] is True


def test_the_runtime_record_cannot_be_forged_or_edited() -> None:
    forged = created()
    forged["metadata"]["annotations"][SNAPSHOT] = '{"replicatedJobs":[]}'
    assert "set by queuectl's mutating webhook" in refusal(forged)
    unqueued = copy.deepcopy(forged)
    del unqueued["metadata"]["labels"]
    assert f"annotation {SNAPSHOT} is set by queuectl only" in refusal(unqueued)
    old = created()
    assert "queuectl's record of the runtime" in refusal(forged, old)
    stripped = copy.deepcopy(old)
    del stripped["metadata"]["annotations"]
    assert "queuectl's record of the runtime" in refusal(stripped, old)


def test_the_queue_label_in_spec_labels_is_refused_it_would_only_reach_the_jobset() -> None:
    job = created()
    job["spec"]["labels"] = {names.LABEL_QUEUE_NAME: "lq"}
    assert "put it in metadata.labels" in refusal(job)


def test_a_trainjob_is_queued_at_create_only() -> None:
    old = docs()["pretrain"]
    del old["metadata"]["labels"]
    old["spec"]["suspend"] = True
    new = copy.deepcopy(old)
    new["metadata"]["labels"] = {names.LABEL_QUEUE_NAME: "lq"}
    assert "a TrainJob is queued when it is created" in refusal(new, old)


def test_queuectls_overrides_are_the_controllers_alone() -> None:
    old = created()
    old["spec"]["podTemplateOverrides"].append(
        {"targetJobs": [{"name": "node"}], "metadata": {"labels": {names.LABEL_WORKLOAD: "w"}}}
    )
    new = copy.deepcopy(old)
    new["spec"]["podTemplateOverrides"][1]["spec"] = {"nodeSelector": {"rack": "mine"}}
    assert "are queuectl's placement" in refusal(new, old)


def test_unsuspending_a_waiting_trainjob_by_hand_is_refused() -> None:
    old = created()
    new = copy.deepcopy(old)
    new["spec"]["suspend"] = False
    assert "cannot be unsuspended by hand" in refusal(new, old)


def test_scaling_up_num_nodes_while_admitted_is_refused() -> None:
    old = created()
    old["spec"]["suspend"] = False  # running: admitted
    new = copy.deepcopy(old)
    new["spec"]["trainer"]["numNodes"] = 8
    message = refusal(new, old)
    assert (
        "the pods it runs at once (trainer.numNodes, else the runtime's mlPolicy.numNodes) "
        "from 4 to 8 while it is admitted" in message
    ), message


def test_an_admitted_trainjobs_runtime_and_placement_overrides_are_frozen() -> None:
    """Admitted means frozen for a TrainJob too: its runtime (`FreezesFields`) and the
    nodeSelector its own overrides give the trainer's nodes; waiting, both may change."""
    job = created()
    job["spec"]["suspend"] = False
    admitted = InMemoryLookup(
        local_queues=LOOKUP.local_queues, inputs=LOOKUP.inputs, admitted_jobs={(NS, "pretrain")}
    )
    other = copy.deepcopy(job)
    other["spec"]["runtimeRef"]["name"] = "mpi-distributed"
    answer = validate_job(review(other, job), admitted)
    assert answer["allowed"] is False and "spec.runtimeRef" in answer["status"]["message"]
    moved = copy.deepcopy(job)
    moved["spec"]["podTemplateOverrides"][0]["spec"]["nodeSelector"] = {"gpu": "h100"}
    answer = validate_job(review(moved, job), admitted)
    assert answer["allowed"] is False
    assert (
        "spec.podTemplateOverrides (targetJobs node).spec.nodeSelector"
        in (answer["status"]["message"])
    )
    waiting, was = copy.deepcopy(moved), copy.deepcopy(job)
    waiting["spec"]["suspend"] = was["spec"]["suspend"] = True
    assert validate_job(review(waiting, was), LOOKUP)["allowed"] is True
