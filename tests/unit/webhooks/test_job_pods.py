"""A pod claiming a queued Job must be one the Job keeps.

The Job controller releases a pod that names its Job as controller but lacks the labels the
Job's selector matches: it removes the ownerReference, and the pod runs on as a bare pod of
nobody's queue. Found by the bypass fuzzer: a bare 8-GPU pod claiming a JobSet's Job ran
beside the JobSet's admitted 8 GPUs. Such a pod is refused at create; the pods the Job
controller makes (with the selector's labels) pass, and so does anything that is no claim on a
queued Job.
"""

from __future__ import annotations

from typing import Any

import pytest
from webhook_cases import NS, gpu_pod_claiming, request

from queuectl.api import names
from queuectl.jobs.batch import JOBS
from queuectl.jobs.jobset.kind import JOBSETS
from queuectl.webhooks import configs
from queuectl.webhooks.lookup import InMemoryLookup
from queuectl.webhooks.pods import validate_pod

Obj = dict[str, Any]
POD_KIND = {"group": "", "version": "v1", "kind": "Pod"}
JOB_UID = "job-u"
SELECTED = {"batch.kubernetes.io/controller-uid": JOB_UID}
JOB_CONTROLLER = "system:serviceaccount:kube-system:job-controller"


def job(labels: dict[str, str] | None = None, owner: Obj | None = None) -> Obj:
    """Job `train` (8 GPUs a pod), with the selector the API server gives it."""
    meta: Obj = {"name": "train", "namespace": NS, "uid": JOB_UID, "labels": dict(labels or {})}
    if owner is not None:
        meta["ownerReferences"] = [owner]
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": meta,
        "spec": {"selector": {"matchLabels": dict(SELECTED)}, "template": {"spec": {}}},
    }


def claiming(uid: str = JOB_UID, labels: dict[str, str] | None = None) -> Obj:
    """A bare 8-GPU pod naming Job `train` as its controller."""
    ref = {"apiVersion": "batch/v1", "kind": "Job", "name": "train", "uid": uid}
    return gpu_pod_claiming(ref, labels)


QUEUED = {names.LABEL_QUEUE_NAME: "gpu"}
JOBSET_REF = {
    "apiVersion": "jobset.x-k8s.io/v1alpha2",
    "kind": "JobSet",
    "name": "js",
    "uid": "js-u",
    "controller": True,
}


def lookup_with(job_obj: Obj, jobset: bool = False) -> InMemoryLookup:
    out = InMemoryLookup()
    out.owners[(JOBS.plural, NS, "train")] = job_obj
    if jobset:
        js = {"metadata": {"name": "js", "namespace": NS, "uid": "js-u", "labels": QUEUED}}
        out.owners[(JOBSETS.plural, NS, "js")] = js
    return out


def decide(pod: Obj, lookup: InMemoryLookup, user: str = "alice") -> Any:
    return validate_pod(request(pod, kind=POD_KIND, user=user), lookup)


@pytest.mark.parametrize(
    ("case", "lookup"),
    [
        ("a queued Job", lookup_with(job(QUEUED))),
        ("a JobSet's Job (queued through its owner)", lookup_with(job(owner=JOBSET_REF), True)),
    ],
)
def test_a_pod_claiming_a_queued_job_it_is_not_selected_by_is_refused(
    case: str, lookup: InMemoryLookup
) -> None:
    response = decide(claiming(), lookup)
    assert response["allowed"] is False, case
    message = response["status"]["message"]
    assert "Job 'train'" in message and "selector" in message
    assert names.LABEL_QUEUE_NAME in message  # says how to queue a pod of one's own


@pytest.mark.parametrize(
    ("case", "pod", "lookup"),
    [
        ("the Job controller's own pod", claiming(labels=SELECTED), lookup_with(job(QUEUED))),
        ("a claim naming another uid (no such Job)", claiming(uid="x"), lookup_with(job(QUEUED))),
        ("a Job nobody queued", claiming(), lookup_with(job())),
        ("a Job the cache has not seen", claiming(), InMemoryLookup()),
    ],
)
def test_anything_that_is_no_claim_on_a_queued_job_passes(
    case: str, pod: Obj, lookup: InMemoryLookup
) -> None:
    assert decide(pod, lookup)["allowed"] is True, case


def test_a_manual_selector_is_what_the_pod_must_match() -> None:
    manual = job(QUEUED)
    manual["spec"]["selector"] = {"matchLabels": {"app": "train"}}
    assert decide(claiming(labels={"app": "train"}), lookup_with(manual))["allowed"] is True
    assert decide(claiming(labels=SELECTED), lookup_with(manual))["allowed"] is False


def test_only_forged_claims_and_manual_selectors_are_sent_failing_closed() -> None:
    """The Job controller labels each pod with its Job's uid: those pods never reach us."""
    _, validating = configs.render_webhook_configurations(configs.UrlClient("https://x:9443"))
    hook = next(h for h in validating["webhooks"] if h["name"] == configs.VALIDATE_JOB_POD)
    assert hook["failurePolicy"] == "Fail"
    assert hook["clientConfig"]["url"].endswith(names.WEBHOOK_PATH_VALIDATE_POD)
    conditions = {c["name"]: c["expression"] for c in hook["matchConditions"]}
    assert "batch.kubernetes.io/controller-uid" in conditions["claims-a-job-unselected"]
    assert names.CONTROLLER_USERNAME in conditions["not-the-controller"]
    assert decide(claiming(), lookup_with(job(QUEUED)), JOB_CONTROLLER)["allowed"] is False


def test_a_hand_made_review_whose_reference_names_no_job_is_answered() -> None:
    """The API server never sends a reference without a name; a hand-made review that does
    gets an answer (no Job is named, so none is claimed), not an internal error."""
    pod = claiming()
    del pod["metadata"]["ownerReferences"][0]["name"]
    assert decide(pod, lookup_with(job(QUEUED)))["allowed"] is True
