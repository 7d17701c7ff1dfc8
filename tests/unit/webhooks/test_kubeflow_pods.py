"""A pod claiming a queued Kubeflow job (MPIJob, PyTorchJob) must be one its operator made.

The operator makes every pod from the job's templates, which carry the `queuectl.io/workload`
label once the controller admits the job; a pod claiming the job as its controller without it
was made by hand, and no Workload's count includes it. Found by the bypass fuzzer: an 8-GPU pod
with a queue label, claiming an admitted MPIJob, ran beside its workers. Such a pod is refused at
create; the operator's own pods, and anything that is no claim on a queued Kubeflow job, pass.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest
from webhook_cases import NS, gpu_pod_claiming, request

from queuectl.api import names
from queuectl.jobs.mpi import MPI_JOBS, MPIJob
from queuectl.webhooks import configs
from queuectl.webhooks.lookup import InMemoryLookup
from queuectl.webhooks.pods import validate_pod
from tests.unit.jobs.test_jobs_mpi import suspended

Obj = dict[str, Any]
POD_KIND = {"group": "", "version": "v1", "kind": "Pod"}
UID = "mpi-u"
QUEUED = {names.LABEL_QUEUE_NAME: "gpu"}


def mpijob(labels: dict[str, str] | None = None) -> Obj:
    """MPIJob `train` (mpi-operator's pi example) as admitted: its templates carry the
    workload label."""
    job: Obj = copy.deepcopy(suspended())
    job["metadata"] |= {"name": "train", "namespace": NS, "uid": UID, "labels": dict(labels or {})}
    workload = MPIJob().workload_name(job)
    for spec in job["spec"]["mpiReplicaSpecs"].values():
        spec["template"].setdefault("metadata", {})["labels"] = {names.LABEL_WORKLOAD: workload}
    return job


OWN = MPIJob().workload_name(mpijob(QUEUED))


def claiming(uid: str = UID, labels: dict[str, str] | None = None) -> Obj:
    """An 8-GPU pod naming MPIJob `train` as its controller."""
    ref = {"apiVersion": "kubeflow.org/v2beta1", "kind": "MPIJob", "name": "train", "uid": uid}
    return gpu_pod_claiming(ref, labels)


def lookup_with(job: Obj) -> InMemoryLookup:
    out = InMemoryLookup()
    out.owners[(MPI_JOBS.plural, NS, "train")] = job
    out.inputs[(MPI_JOBS.plural, NS, "train")] = job  # the cache, as owned.py reads owners
    return out


def decide(pod: Obj, lookup: InMemoryLookup) -> Any:
    return validate_pod(request(pod, kind=POD_KIND, user="alice"), lookup)


@pytest.mark.parametrize(
    ("case", "labels"),
    [("a bare pod", {}), ("a pod with a queue label", QUEUED)],
)
def test_a_pod_claiming_a_queued_mpijob_without_its_workload_label_is_refused(
    case: str, labels: dict[str, str]
) -> None:
    response = decide(claiming(labels=labels), lookup_with(mpijob(QUEUED)))
    assert response["allowed"] is False, case
    message = response["status"]["message"]
    want = MPIJob().workload_name(mpijob(QUEUED))
    assert "MPIJob 'train'" in message and f"{names.LABEL_WORKLOAD}={want}" in message
    assert names.LABEL_QUEUE_NAME in message  # says how to queue a pod of one's own


@pytest.mark.parametrize(
    ("case", "pod", "job"),
    [
        ("the operator's own pod", claiming(labels={names.LABEL_WORKLOAD: OWN}), QUEUED),
        ("a claim naming another uid (no such MPIJob)", claiming(uid="x"), QUEUED),
        ("an MPIJob nobody queued", claiming(), {}),
    ],
)
def test_anything_that_is_no_forged_claim_on_a_queued_mpijob_passes(
    case: str, pod: Obj, job: dict[str, str]
) -> None:
    assert decide(pod, lookup_with(mpijob(job)))["allowed"] is True, case


def test_an_unlabelled_claim_on_a_kubeflow_job_is_sent_to_the_webhook() -> None:
    """Bare pods reach it through the job-pod hook's condition; the operator's labelled pods
    never do."""
    _, validating = configs.render_webhook_configurations(configs.UrlClient("https://x:9443"))
    hook = next(h for h in validating["webhooks"] if h["name"] == configs.VALIDATE_JOB_POD)
    conditions = {c["name"]: c["expression"] for c in hook["matchConditions"]}
    sent = conditions["claims-a-job-unselected"]
    assert "kubeflow.org/" in sent and names.LABEL_WORKLOAD in sent
