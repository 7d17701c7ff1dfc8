"""`queuectl describe job NAME`: a user names the Job they submitted, not the Workload queuectl
made for it; the CLI finds the Workload (by the Job's label, else by ownership) or says why none."""

from __future__ import annotations

from typing import Any

import pytest

from queuectl.api import names
from queuectl.api.resource import WORKLOADS, Resource
from queuectl.cli._jobkinds import by_name
from queuectl.cli._kube import CliError
from queuectl.cli.describe import workload_of_job
from queuectl.cli.main import build_parser
from queuectl.jobs.batch import JOBS

Obj = dict[str, Any]


class FakeApi:
    """Just the two calls `workload_of_job` makes."""

    def __init__(self, job: Obj, workloads: list[Obj]) -> None:
        self.job, self.workloads = job, workloads

    def get(self, kind: Resource, name: str, namespace: str | None = None) -> Obj:
        assert (kind, name, namespace) == (JOBS, "train", "team-a")
        return self.job

    def list(self, kind: Resource, namespace: str | None = None) -> list[Obj]:
        assert (kind, namespace) == (WORKLOADS, "team-a")
        return self.workloads


def job(**labels: str) -> Obj:
    return {"metadata": {"name": "train", "uid": "u-1", "labels": labels}}


def owned_workload(name: str, uid: str) -> Obj:
    return {"metadata": {"name": name, "ownerReferences": [{"kind": "Job", "uid": uid}]}}


@pytest.mark.parametrize(
    ("the_job", "workloads", "found"),
    [
        (job(**{names.LABEL_WORKLOAD: "job-train-ab12cd34"}), [], "job-train-ab12cd34"),
        (
            job(**{names.LABEL_QUEUE_NAME: "lq"}),
            [owned_workload("other", "u-0"), owned_workload("job-train-1", "u-1")],
            "job-train-1",
        ),
    ],
    ids=["by the label the controller sets", "by ownership before the label is written"],
)
def test_a_job_leads_to_its_workload(the_job: Obj, workloads: list[Obj], found: str) -> None:
    assert workload_of_job(FakeApi(the_job, workloads), "train", "team-a") == found


@pytest.mark.parametrize(
    ("the_job", "says"),
    [
        (job(), "is not queued by queuectl: it has no queuectl.io/queue-name label"),
        (job(**{names.LABEL_QUEUE_NAME: "lq"}), "has no Workload yet"),
    ],
    ids=["unlabelled job", "labelled job the controller has not seen"],
)
def test_a_job_without_a_workload_is_a_one_line_error_saying_why(the_job: Obj, says: str) -> None:
    with pytest.raises(CliError, match=says):
        workload_of_job(FakeApi(the_job, [owned_workload("x", "u-9")]), "train", "team-a")


def test_job_is_a_describe_kind_with_its_plural() -> None:
    parser, _ = build_parser()
    assert parser.parse_args(["describe", "jobs", "train", "-n", "team-a"]).kind == "job"


# --- every registered kind, by the names kubectl gives it ---
@pytest.mark.parametrize(
    ("typed", "kind"),
    [
        ("job", "job"),
        ("jobs.batch", "job"),
        ("jobset", "jobset"),
        ("jobsets", "jobset"),
        ("jobsets.jobset.x-k8s.io", "jobset"),
        ("JobSet", "jobset"),
    ],
)
def test_each_job_kind_is_a_describe_kind_by_its_kubectl_names(typed: str, kind: str) -> None:
    parser, _ = build_parser()
    assert parser.parse_args(["describe", typed, "train", "-n", "team-a"]).kind == kind


class FakeJobSetApi(FakeApi):
    def get(self, kind: Resource, name: str, namespace: str | None = None) -> Obj:
        assert (kind.kind, kind.group, kind.plural) == ("JobSet", "jobset.x-k8s.io", "jobsets")
        return self.job


def test_a_jobset_leads_to_the_workload_it_owns_and_errors_name_the_kind() -> None:
    owned = {
        "metadata": {
            "name": "jobset-train-1",
            "ownerReferences": [{"kind": "JobSet", "uid": "u-1"}],
        }
    }
    not_it = owned_workload("job-train-1", "u-1")  # a batch Job's: same uid, other kind
    api = FakeJobSetApi(job(**{names.LABEL_QUEUE_NAME: "lq"}), [not_it, owned])
    assert workload_of_job(api, "train", "team-a", by_name("jobset")) == "jobset-train-1"
    with pytest.raises(CliError, match=r'^JobSet "train" in namespace team-a has no Workload yet'):
        workload_of_job(
            FakeJobSetApi(job(**{names.LABEL_QUEUE_NAME: "lq"}), []),
            "train",
            "team-a",
            by_name("jobset"),
        )
