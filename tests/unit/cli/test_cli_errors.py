"""Commands parse like kubectl and fail in one line: aliases, patches, error sentences."""

from __future__ import annotations

import pytest

from queuectl.api.resource import CLUSTER_QUEUES, NODES, WORKLOADS, Resource
from queuectl.cli import stopresume
from queuectl.cli._kube import ApiFailure, CliError, Kube
from queuectl.cli.main import build_parser, main

JOBSET = Resource("jobset.x-k8s.io", "v1alpha2", "jobsets", True, "JobSet")


@pytest.mark.parametrize(
    ("argv", "kind"),
    [
        (["describe", "cq", "x"], "clusterqueue"),
        (["describe", "ClusterQueues", "x"], "clusterqueue"),
        (["describe", "lq", "x", "-n", "ns"], "localqueue"),
        (["describe", "co", "x"], "cohort"),
        (["describe", "wl", "x"], "workload"),
        (["list", "rf"], "flavor"),
        (["list", "workloads", "-A", "-o", "wide", "--status", "pending"], "workload"),
        (["stop", "cq", "x", "--drain"], "clusterqueue"),
        (["resume", "workload", "x"], "workload"),
    ],
)
def test_kind_aliases(argv: list[str], kind: str) -> None:
    parser, broken = build_parser()
    assert not {"describe", "listing", "stopresume"} & set(broken)
    assert parser.parse_args(argv).kind == kind


@pytest.mark.parametrize(
    "argv", [["describe", "flavor", "x"], ["stop", "cohort", "x"], ["list", "pods"]]
)
def test_unsupported_kinds_are_usage_errors(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2
    assert "unknown kind" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("kind", "stop", "drain", "patch"),
    [
        ("clusterqueue", True, False, {"spec": {"stopPolicy": "Hold"}}),
        ("clusterqueue", True, True, {"spec": {"stopPolicy": "HoldAndDrain"}}),
        ("localqueue", True, True, {"spec": {"stopPolicy": "HoldAndDrain"}}),
        ("localqueue", False, False, {"spec": {"stopPolicy": "None"}}),
        ("workload", True, False, {"spec": {"active": False}}),
        ("workload", False, False, {"spec": {"active": True}}),
    ],
)
def test_stop_and_resume_patches(
    kind: str, stop: bool, drain: bool, patch: dict[str, object]
) -> None:
    assert stopresume.patch_for(kind, stop, drain) == patch
    assert stopresume.describe_change(kind, "x", patch).startswith(f"{kind}/x ")


def test_drain_is_refused_for_a_workload() -> None:
    with pytest.raises(CliError, match="--drain applies to queues"):
        stopresume.patch_for("workload", True, True)


def test_missing_kubeconfig_is_one_line_and_exit_1(capsys: pytest.CaptureFixture[str]) -> None:
    rc = main(["list", "cq", "--kubeconfig", "/nonexistent/kubeconfig"])
    err = capsys.readouterr().err
    assert rc == 1
    assert err.count("\n") == 1 and err.startswith("queuectl: error: cannot load a kubeconfig")
    assert "Traceback" not in err


class FakeKube(Kube):
    """A Kube whose discovery answer is scripted (no API server)."""

    def __init__(self, served: bool) -> None:
        self._ours_served = served

    @property
    def host(self) -> str:
        return "https://example:6443"

    def served(self, kind: Resource) -> bool:
        return self._ours_served is True  # an operator's kind: served as scripted too


@pytest.mark.parametrize(
    ("served", "status", "kind", "message"),
    [
        (False, 404, CLUSTER_QUEUES, "the queuectl CRDs are not installed in the cluster at "),
        (True, 404, WORKLOADS, 'Workload "w" not found'),
        (False, 404, NODES, 'Workload "w" not found'),  # a core kind: never blame the CRDs
        (True, 404, JOBSET, 'Workload "w" not found'),
        (False, 404, JOBSET, "does not serve JobSet (no jobsets in jobset.x-k8s.io/v1alpha2); "),
        (True, 403, WORKLOADS, "access denied: workloads is forbidden"),
        (True, 401, WORKLOADS, "refused the kubeconfig's credentials"),
        (True, 500, WORKLOADS, "the API server answered 500"),
    ],
)
def test_api_failures_in_words(served: bool, status: int, kind: Resource, message: str) -> None:
    err = FakeKube(served).explain_failure(
        ApiFailure(status, "workloads is forbidden"),
        kind,
        'Workload "w"',
    )
    assert message in str(err)
    assert "\n" not in str(err)


def test_api_failure_reads_the_status_message() -> None:
    body = b'{"kind":"Status","message":"nodes is forbidden: User \\"bob\\" cannot list"}'
    assert ApiFailure.from_body(403, body).message == 'nodes is forbidden: User "bob" cannot list'
    assert (
        ApiFailure.from_body(502, b"<html>bad gateway</html>").message == "<html>bad gateway</html>"
    )
    assert ApiFailure.from_body(504, None).message == "HTTP 504"
