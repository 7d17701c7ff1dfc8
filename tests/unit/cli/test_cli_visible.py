"""`queuectl list workloads` for a namespace user who may not list cluster-wide: their
namespace's Workloads, ranked and explained by the controller's visibility API, with a note."""

from __future__ import annotations

from typing import Any

import pytest

from queuectl import convert
from queuectl.api import resource as rest
from queuectl.api.resource import Resource
from queuectl.cli import _visible, listing
from queuectl.cli._kube import ApiFailure, CliError, Obj
from queuectl.cli._render import Term
from tests.unit.cli.cli_objects import NOW, local_queue, workload


class NamespaceUser:
    """What alice in team-a may do: list her namespace's LocalQueues and Workloads and read
    LocalQueue `lq`'s line; LocalQueue `lq2`'s line is not served."""

    def __init__(self, line: list[Any]) -> None:
        self.line = line
        self.objects = {
            "localqueues": [
                local_queue("team-a", "lq", "gpus"),
                local_queue("team-a", "lq2", "gpus"),
            ],
            "workloads": [
                workload("team-a", "running", "lq", 8, admitted_to="gpus"),
                workload("team-a", "early", "lq", 8, created=NOW - 500),
                workload("team-a", "urgent", "lq", 8, priority=100, created=NOW - 100),
            ],
        }

    def list(
        self, kind: Resource, namespace: str | None = None, label_selector: str | None = None
    ) -> list[Obj]:
        assert namespace == "team-a", "a namespace user lists only their namespace"
        return self.objects[kind.plural]

    def request(self, method: str, path: str) -> Obj:
        if path == _visible.pending_path("team-a", "lq"):
            return {"kind": "PendingWorkloadsSummary", "items": self.line}
        raise ApiFailure(503, "the server is currently unable to handle the request")


def item(name: str, pos_cq: int, message: str) -> Any:
    return {
        "metadata": {"name": name, "namespace": "team-a"},
        "positionInClusterQueue": pos_cq,
        "reason": "Pending",
        "message": message,
    }


def test_the_line_and_reasons_come_from_the_visibility_api() -> None:
    """Another team's workload stands first in the ClusterQueue: alice's urgent job is 2nd and
    her early one 3rd, each with the scheduler's reason; the running one has no position."""
    user = NamespaceUser([item("urgent", 1, "waits for 8 GPUs"), item("early", 2, "behind urgent")])
    records, notes = _visible.namespace_workloads(user, "team-a", None, None, now=NOW)
    assert [(r["name"], r["position"], r["reason"]) for r in records] == [
        ("urgent", 2, "waits for 8 GPUs"),
        ("early", 3, "behind urgent"),
        ("running", None, ""),
    ]
    assert all(r["clusterQueue"] == "gpus" for r in records)
    assert "cannot list cluster-wide" in notes[0] and "visibility API" in notes[0]
    assert "no line for LocalQueue lq2: 503" in notes[1]
    table = listing.render("workload", records, "wide", Term(color=False), False)
    assert "waits for 8 GPUs" in table


def test_filters_by_queue_and_status() -> None:
    user = NamespaceUser([item("urgent", 0, "x"), item("early", 1, "y")])
    records, _ = _visible.namespace_workloads(user, "team-a", "lq", "pending", now=NOW)
    assert [r["name"] for r in records] == ["urgent", "early"]


def test_only_an_access_denied_listing_falls_back() -> None:
    def failure(status: int) -> CliError:
        err = CliError("x")
        err.__cause__ = ApiFailure(status, "no")
        return err

    assert _visible.denied(failure(403))
    assert not _visible.denied(failure(404))
    assert not _visible.denied(CliError("unreachable"))
    assert rest.WORKLOADS.namespaced


def test_describe_localqueue_shows_the_line_from_the_visibility_api() -> None:
    user = NamespaceUser([item("urgent", 1, "waits for 8 GPUs"), item("early", 2, "behind")])
    user.line[0]["positionInLocalQueue"], user.line[1]["positionInLocalQueue"] = 0, 1
    out = _visible.describe_local_queue(user, "lq", "team-a", Term(color=False))
    assert "ClusterQueue: gpus" in out
    assert "visibility API" in out
    rows = [
        line.split()[:3]
        for line in out.splitlines()
        if line.split()[2:3] in (["urgent"], ["early"])
    ]
    assert rows == [["2", "1", "urgent"], ["3", "2", "early"]]


def test_describe_a_localqueue_whose_line_is_not_served_says_what_to_ask_for() -> None:
    user = NamespaceUser([])
    with pytest.raises(CliError, match=r"visibility API answered 503.*queuectl-batch-user"):
        _visible.describe_local_queue(user, "lq2", "team-a", Term(color=False))
    with pytest.raises(CliError, match='LocalQueue "nope" not found in namespace team-a'):
        _visible.describe_local_queue(user, "nope", "team-a", Term(color=False))


def test_describe_workload_shows_its_place_reason_and_eta_from_the_visibility_api() -> None:
    """alice's urgent job waits 2nd in the ClusterQueue (1st in her queue): describe says where,
    why and when it should start, and where those words came from."""
    user = NamespaceUser([item("urgent", 1, "waits for 8 GPUs"), item("early", 2, "behind")])
    user.line[0] |= {
        "positionInLocalQueue": 0,
        "estimatedStartTime": convert.format_time(NOW + 3600),
        "estimatedStartMessage": "assuming running jobs end at their time limits",
    }
    out = _visible.describe_workload(user, "urgent", "team-a", Term(color=False), now=NOW)
    fields = dict(
        (k.strip(), v.strip()) for k, _, v in (ln.partition(":") for ln in out.splitlines()[:12])
    )
    assert fields["ClusterQueue"] == "gpus" and fields["State"].lower().startswith("pending")
    assert fields["Position"] == "2 in ClusterQueue gpus (1 in LocalQueue lq)"
    assert fields["Why"] == "waits for 8 GPUs"
    assert fields["ETA"].startswith("in 1h") and "time limits" in fields["ETA"]
    assert "visibility API" in fields["Source"]
    assert "main" in out.split("Pod sets", 1)[1]  # its pod sets follow


@pytest.mark.parametrize(
    ("name", "line", "position"),
    [
        ("running", [], None),  # admitted: no line to show
        ("early", [], "not in line (the controller does not hold it in line now)"),
    ],
)
def test_describe_workload_outside_the_line(
    name: str, line: list[Any], position: str | None
) -> None:
    out = _visible.describe_workload(
        NamespaceUser(line), name, "team-a", Term(color=False), now=NOW
    )
    shown = [ln.split(":", 1)[1].strip() for ln in out.splitlines() if ln.startswith("Position")]
    assert shown == ([position] if position else [])


def test_describe_workload_says_when_its_line_is_not_served_or_it_does_not_exist() -> None:
    user = NamespaceUser([])
    user.objects["workloads"].append(workload("team-a", "other", "lq2", 8))
    out = _visible.describe_workload(user, "other", "team-a", Term(color=False), now=NOW)
    assert "Position:" in out and "the visibility API answered 503" in out
    with pytest.raises(CliError, match='Workload "nope" not found in namespace team-a'):
        _visible.describe_workload(user, "nope", "team-a", Term(color=False), now=NOW)
