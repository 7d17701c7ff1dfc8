"""A team moving from Kueue keeps labelling jobs `kueue.x-k8s.io/queue-name`: with the opt-in
on, the webhook queues them as if labelled `queuectl.io/queue-name` (and writes that label, so
everything after sees an ordinary queued job); a job whose two labels disagree is refused; with
the opt-in off, Kueue's label means nothing to queuectl."""

from __future__ import annotations

from typing import Any

import pytest
from webhook_cases import NS, apply_patch, job, request

from queuectl.api import names
from queuectl.webhooks import configs
from queuectl.webhooks.configs import ServiceClient, render_webhook_configurations
from queuectl.webhooks.jobs import mutate_job, validate_job
from queuectl.webhooks.lookup import InMemoryLookup
from queuectl.webhooks.review import decode_patch
from queuectl.webhooks.server import decisions

Q, CQ, KQ = names.LABEL_QUEUE_NAME, names.LABEL_CLUSTER_QUEUE, names.LABEL_KUEUE_QUEUE_NAME


def created(labels: dict[str, str], lookup: InMemoryLookup, *, on: bool) -> dict[str, Any]:
    obj = job(labels)
    response = mutate_job(request(obj), lookup, kueue_queue_label=on)
    assert response["allowed"] is True, response
    return apply_patch(obj, decode_patch(response))


@pytest.mark.parametrize(
    ("scenario", "labels", "on", "want"),
    [
        ("Kueue's label only, opt-in on", {KQ: "gpu"}, True, {KQ: "gpu", Q: "gpu", CQ: "cq-a"}),
        ("both agree", {KQ: "gpu", Q: "gpu"}, True, {KQ: "gpu", Q: "gpu", CQ: "cq-a"}),
        ("queuectl's only", {Q: "gpu"}, True, {Q: "gpu", CQ: "cq-a"}),
        (
            "opt-in off: Kueue's label ignored, the namespace's default queue takes it",
            {KQ: "gpu"},
            False,
            {KQ: "gpu", Q: "default", CQ: "cq-default"},
        ),
    ],
)
def test_a_new_job_is_queued_by_either_label_when_opted_in(
    lookup: InMemoryLookup, scenario: str, labels: dict[str, str], on: bool, want: dict[str, str]
) -> None:
    out = created(labels, lookup, on=on)
    assert out["metadata"]["labels"] == want, scenario
    assert out["spec"]["suspend"] is True, scenario


def test_opt_in_off_a_kueue_labelled_job_in_a_namespace_without_default_queue_is_not_queued(
    lookup: InMemoryLookup,
) -> None:
    obj = job({KQ: "gpu"})
    response = mutate_job(request(obj, namespace="team-b"), lookup)
    assert response["allowed"] is True and "patch" not in response


def test_labels_naming_different_queues_are_refused_on_create(lookup: InMemoryLookup) -> None:
    response = mutate_job(request(job({KQ: "gpu", Q: "other"})), lookup, kueue_queue_label=True)
    assert response["allowed"] is False
    message = response["status"]["message"]
    assert f"Job {NS}/train" in message and "name different LocalQueues" in message
    # The validating webhook says the same, should a later mutation have made them differ.
    response = validate_job(
        request(job({KQ: "gpu", Q: "other"}, True)), lookup, kueue_queue_label=True
    )
    assert response["allowed"] is False


def test_changing_kueues_label_away_from_the_queue_is_refused_but_other_writes_pass(
    lookup: InMemoryLookup,
) -> None:
    old = job({KQ: "gpu", Q: "gpu", CQ: "cq-a"}, True)
    moved = job({KQ: "other", Q: "gpu", CQ: "cq-a"}, True)
    refused = validate_job(request(moved, old=old), lookup, kueue_queue_label=True)
    assert refused["allowed"] is False
    assert "name different LocalQueues" in refused["status"]["message"]
    # A job that disagreed before the opt-in was turned on: unrelated writes still pass.
    stale = job({KQ: "other", Q: "gpu", CQ: "cq-a"}, True)
    touched = job({KQ: "other", Q: "gpu", CQ: "cq-a", "app": "x"}, True)
    assert validate_job(request(touched, old=stale), lookup, kueue_queue_label=True)["allowed"]
    # Opt-in off: Kueue's label is nobody's business.
    assert validate_job(request(moved, old=old), lookup)["allowed"] is True


def test_the_job_routes_carry_the_setting(lookup: InMemoryLookup) -> None:
    routes = {path: decide for path, decide, _ in decisions(lookup, kueue_queue_label=True)}
    for path in (names.WEBHOOK_PATH_MUTATE_JOB, names.WEBHOOK_PATH_MUTATE_UNLABELLED_JOB):
        response = routes[path](request(job({KQ: "gpu", Q: "other"})))
        assert response["allowed"] is False, path
    plain = {path: decide for path, decide, _ in decisions(lookup)}
    response = plain[names.WEBHOOK_PATH_MUTATE_JOB](request(job({KQ: "gpu", Q: "other"})))
    assert response["allowed"] is True


def test_kueue_labelled_jobs_get_a_webhook_of_their_own_that_fails_closed() -> None:
    mutating, _ = render_webhook_configurations(ServiceClient(), kueue_queue_label=True)
    hooks = {w["name"]: w for w in mutating["webhooks"]}
    kueue = hooks[configs.MUTATE_KUEUE_LABELLED_JOB]
    assert kueue["failurePolicy"] == "Fail"
    assert kueue["rules"][0]["operations"] == ["CREATE"]
    assert kueue["clientConfig"]["service"]["path"] == names.WEBHOOK_PATH_MUTATE_JOB
    assert kueue["objectSelector"] == {
        "matchExpressions": [
            {"key": Q, "operator": "DoesNotExist"},
            {"key": KQ, "operator": "Exists"},
        ]
    }
    # the fail-open unlabelled-Job webhook leaves them to it: each Job meets one of the two
    unlabelled = hooks[configs.MUTATE_DEFAULT_QUEUE_JOB]["objectSelector"]["matchExpressions"]
    assert {"key": KQ, "operator": "DoesNotExist"} in unlabelled


def test_without_the_opt_in_the_configurations_are_as_before() -> None:
    plain = render_webhook_configurations(ServiceClient())
    assert plain == render_webhook_configurations(ServiceClient(), kueue_queue_label=False)
    names_ = [w["name"] for w in plain[0]["webhooks"]]
    assert configs.MUTATE_KUEUE_LABELLED_JOB not in names_
