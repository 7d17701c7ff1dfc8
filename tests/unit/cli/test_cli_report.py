"""`queuectl report`: the GPU intervals a Workload records, the chargeback table's CSV and
JSON shape, and the refusals of a bad --since or --by."""

from __future__ import annotations

import argparse
import csv
import io
import json
from typing import Any

import cli_objects as o
import pytest

from queuectl.api import names
from queuectl.cli import _usage, describe, report
from queuectl.cli._render import Term
from queuectl.cli._snapshot import Snapshot
from queuectl.cli.main import build_parser, main
from queuectl.core.cost import Held, Price

H = 3600.0
NOW = o.NOW
PLAIN = Term(color=False, width=200)


def priced(name: str, price: str | None, currency: str = "USD") -> o.Obj:
    f = o.flavor(name, name.upper())
    if price is not None:
        f["spec"]["cost"] = {"gpuHourPrice": price, "currency": currency}
    return f


def cond(type_: str, status: str, at: float, reason: str = "") -> dict[str, Any]:
    return {
        "type": type_,
        "status": status,
        "reason": reason or type_,
        "message": "",
        "lastTransitionTime": o.ts(at),
    }


def finished(wl: o.Obj, at: float) -> o.Obj:
    wl["status"]["conditions"].append(cond(names.COND_FINISHED, "True", at, "Succeeded"))
    return wl


def evicted(wl: o.Obj, past: float, at: float) -> o.Obj:
    """Evicted once after `past` seconds admitted; the eviction completed at `at`."""
    wl.setdefault("status", {})["accumulatedPastExecutionTimeSeconds"] = int(past)
    wl["status"].setdefault("conditions", []).append(
        cond(names.COND_EVICTED, "False", at, "Preempted")
    )
    return wl


# --- what a Workload records -----------------------------------------------------------------
@pytest.mark.parametrize(
    ("case", "make", "expected"),
    [
        ("pending, never admitted", lambda: o.workload("a", "w", "lq", 8), []),
        (
            "admitted 2 h ago, running",
            lambda: o.workload(
                "a", "w", "lq", 4, count=2, admitted_to="cq", admitted_at=NOW - 2 * H
            ),
            [("h100", 8, NOW - 2 * H, NOW)],
        ),
        (
            "finished an hour ago after 3 h",
            lambda: finished(
                o.workload("a", "w", "lq", 8, admitted_to="cq", admitted_at=NOW - 4 * H), NOW - H
            ),
            [("h100", 8, NOW - 4 * H, NOW - H)],
        ),
        (
            "preempted after 1 h, admitted again 30 min ago",
            lambda: evicted(
                o.workload("a", "w", "lq", 8, admitted_to="cq", admitted_at=NOW - 0.5 * H),
                H,
                NOW - 2 * H,
            ),
            [("h100", 8, NOW - 0.5 * H, NOW), ("h100", 8, NOW - 3 * H, NOW - 2 * H)],
        ),
        (
            "preempted after 1 h, waiting again: its flavor is gone with its admission",
            lambda: evicted(o.workload("a", "w", "lq", 8), H, NOW - 2 * H),
            [(_usage.UNKNOWN_FLAVOR, 8, NOW - 3 * H, NOW - 2 * H)],
        ),
    ],
)
def test_the_gpu_intervals_a_workload_records(
    case: str, make: Any, expected: list[tuple[str, float, float, float]]
) -> None:
    got = [(h.flavor, h.gpus, h.start, h.end) for h in _usage.held(make(), NOW)]
    assert got == expected, case


def test_prices_are_read_from_each_flavors_spec_cost() -> None:
    flavors = [priced("h100", "2.50"), priced("a100", "1", "EUR"), priced("cpu", None)]
    assert _usage.prices(flavors) == {"h100": Price(2.5, "USD"), "a100": Price(1.0, "EUR")}


# --- the report's shapes ---------------------------------------------------------------------
def two_teams() -> tuple[list[o.Obj], list[o.Obj]]:
    """team-a: 8 H100 for the last 2 h; team-b: 2 A100 that finished after 3 h, 1 h ago."""
    workloads = [
        o.workload("team-a", "train", "lq", 8, admitted_to="cq-a", admitted_at=NOW - 2 * H),
        finished(
            o.workload(
                "team-b", "sweep", "lq", 2, admitted_to="cq-b", flavor_name="a100",
                admitted_at=NOW - 4 * H,
            ),
            NOW - H,
        ),
    ]  # fmt: skip
    return workloads, [priced("h100", "2.50"), priced("a100", "1.00")]


def rendered(output: str, by: str = "namespace") -> str:
    workloads, flavors = two_teams()
    rows = report.compute(workloads, flavors, report.group_by(by), NOW - 7 * 24 * H, NOW)
    return report.render(rows, report.group_by(by), output, NOW - 7 * 24 * H, NOW, PLAIN)


def test_csv_has_one_header_and_a_row_per_team() -> None:
    got = list(csv.reader(io.StringIO(rendered("csv"))))
    assert got == [
        ["namespace", "gpu_hours", "cost", "currency"],
        ["team-a", "16.0000", "40.0000", "USD"],
        ["team-b", "6.0000", "6.0000", "USD"],
    ]


def test_json_names_the_window_the_rule_the_rows_and_the_totals() -> None:
    got = json.loads(rendered("json", by="cq"))
    assert got["by"] == "clusterqueue"
    assert got["since"] == "2027-01-08T08:00:00Z" and got["until"] == "2027-01-15T08:00:00Z"
    assert "price now" in got["pricing"]
    assert got["rows"] == [
        {"clusterQueue": "cq-a", "gpuHours": 16.0, "cost": 40.0, "currency": "USD"},
        {"clusterQueue": "cq-b", "gpuHours": 6.0, "cost": 6.0, "currency": "USD"},
    ]
    assert got["totals"] == [{"gpuHours": 22.0, "cost": 46.0, "currency": "USD"}]


def test_the_table_states_its_limits_and_the_promql_for_long_windows() -> None:
    text = rendered("table", by="flavor")
    assert "FLAVOR" in text and "TOTAL" in text and "h100" in text
    assert "deleted ones are gone" in text
    assert "sum by (flavor, currency) (increase(queuectl_gpu_cost_total[7d]))" in text


# --- bad input ---------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("text", "seconds"),
    [("7d", 7 * 86400), ("12h", 12 * H), ("1d12h", 36 * H), ("90m", 5400), ("1w", 604800)],
)
def test_durations(text: str, seconds: float) -> None:
    assert report.duration(text) == seconds


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["--since", "7"], "'7' is not a duration: give a number and a unit (s, m, h, d or w)"),
        (["--since", "7days"], "'7days' is not a duration"),
        (["--since=-1d"], "'-1d' is not a duration"),
        (["--since", "0d"], "'0d' is an empty window"),
        (["--since", "99999w"], "'99999w' is longer than 10 years"),
        (["--by", "team-lead"], "unknown grouping 'team-lead': use one of namespace, clusterqueue"),
        (["-o", "xml"], "invalid choice: 'xml'"),
    ],
)
def test_bad_input_is_refused_before_the_cluster_is_asked(
    argv: list[str], says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["report", *argv])
    assert exit_.value.code == 2
    assert says in capsys.readouterr().err


def test_the_default_window_is_a_week() -> None:
    parser, _ = build_parser()
    assert parser.parse_args(["report"]).since == 7 * 86400


def test_by_aliases() -> None:
    assert [report.group_by(x) for x in ("ns", "team", "cq", "wl", "Flavor")] == [
        "namespace",
        "namespace",
        "clusterqueue",
        "workload",
        "flavor",
    ]
    with pytest.raises(argparse.ArgumentTypeError):
        report.group_by("")


def test_held_is_a_plain_interval() -> None:
    """The report's input type carries everything a row key needs."""
    h = _usage.held(o.workload("a", "w", "lq", 1, admitted_to="cq"), NOW)[0]
    assert h == Held("a", "w", "cq", "h100", 1.0, NOW - 300, NOW)


# --- describe ----------------------------------------------------------------------------------
def test_describe_shows_a_workloads_gpu_hours_and_cost_so_far() -> None:
    """l-run holds 2 x 8 H100 since 5 minutes ago: 1.33 GPU-hours, at 3.00 an hour 4.00 USD;
    without a price the line says where to set one; a pending workload has no such line."""
    objs = o.research_tree()
    objs["resourceflavors"] = [priced("h100", "3.00")]
    objs["workloads"].append(o.workload("team-llm", "waiting", "training", 8))
    snap = Snapshot.from_objects(objs, now=NOW)
    text = describe.describe(snap, "workload", "l-run", "team-llm", PLAIN)
    assert "GPU time" in text
    assert "1.33 GPU-hours so far (1.33 on h100); cost 4.00 USD at the current price" in text
    free = describe.describe(Snapshot.from_objects(o.research_tree(), now=NOW), "workload",
                             "l-run", "team-llm", PLAIN)  # fmt: skip
    assert "1.33 GPU-hours so far (1.33 on h100); no price set (ResourceFlavor spec.cost)" in free
    assert "GPU time" not in describe.describe(snap, "workload", "waiting", "team-llm", PLAIN)
