"""The results a run reports: every new field, and a table that shows every target and every
reference figure the scenario files name (a key the report does not know would vanish)."""

from __future__ import annotations

from collections import Counter
from types import SimpleNamespace
from typing import Any

import pytest

from bench.cluster import report, watch
from bench.cluster import results as figures
from bench.cluster.lease import LeaseLog
from bench.cluster.probe import ProbeLog
from bench.cluster.procstat import ProcSample
from bench.cluster.record import Recorder
from bench.cluster.scenario import load

CYCLE = watch.CYCLE_HISTOGRAM
BEFORE = f'{CYCLE}_bucket{{le="0.1"}} 0\n{CYCLE}_bucket{{le="+Inf"}} 0\n{CYCLE}_count 0\n'
AFTER = f'{CYCLE}_bucket{{le="0.1"}} 4\n{CYCLE}_bucket{{le="+Inf"}} 4\n{CYCLE}_count 4\n'
RENEWED = "2026-11-25T00:00:{:02d}.000000Z"


def a_run(scenario_name: str) -> dict[str, Any]:
    """The results of a short made-up run: one Workload per class, the medium one evicted once."""
    scenario = load(scenario_name)
    rec = Recorder(scenario.nominal_total)
    for i, stream in enumerate(scenario.streams):
        name = stream.cls
        rec.add(name, stream.cls, stream.units)
        rec.created(name, 0.0)
        rec.admitted(name, 1.0 + i)
        rec.api_admission(name, 1000.0, 1001.0 + i)
    rec.stopped("medium", 4.0, finished=False)  # ran 2 s
    rec.admitted("medium", 5.0)
    rec.api_admission("medium", 1000.0, 1005.0)
    for stream in scenario.streams:
        rec.stopped(stream.cls, 9.0, finished=True)
    driver = SimpleNamespace(
        creation_lag_max=0.0,
        finish_latencies=[0.1],
        retries=0,
        conflicts=0,
        watch_events=9,
        evicted_after_runtime=0,
    )
    proc: dict[str, ProcSample | None] = {"controller": ProcSample(1.0, 100.0, 120.0)}
    res = figures.results(
        scenario, rec, driver, "2026-11-25T00:00:00Z", 1.0, 0.5, 10,  # type: ignore[arg-type]
        Counter({("workloads/status", "PATCH"): 30}), proc, proc, True, [0.1, 0.1, 0.1],
    )  # fmt: skip
    lease = LeaseLog()
    for second in (0, 2, 4):
        lease.observe({"holderIdentity": "ctl", "renewTime": RENEWED.format(second)})
    probes = ProbeLog(latencies_ms=[3.0, 5.0, 40.0])
    res.update(report.rounded(watch.controller_watch(lease, 1795564805.0, probes, BEFORE, AFTER)))
    return res


def test_a_run_reports_every_new_figure() -> None:
    res = a_run("baseline")
    assert [k for k in report.REQUIRED if res.get(k) is None] == []
    assert res["evicted_unit_seconds"] == 10.0  # medium: 5 units x 2 s
    assert res["evictions_pct"] == 25.0  # 1 of 4 admissions
    assert res["tta_avg_s"]["medium"] == 2.0  # first seen admission
    assert res["tta_reference_avg_s"]["medium"] == 5.0  # the last admission's condition
    assert res["webhook_probe_ms"] == {
        "sent": 3, "p50": 5.0, "p99": 40.0, "max": 40.0, "refused": 0, "timed_out": 0,
    }  # fmt: skip
    assert res["lease_renewal_max_gap_s"] == 2.0
    assert res["lease"]["lost"] is False
    assert res["cycle_ms"]["count"] == 4 and res["cycle_ms"]["p99"] == pytest.approx(99.0)


@pytest.mark.parametrize("scenario_name", ["baseline", "large-scale"])
def test_every_target_and_reference_figure_of_a_scenario_is_in_its_table(
    scenario_name: str,
) -> None:
    scenario = load(scenario_name)
    table = report.rows(a_run(scenario_name))
    targets = {target for _, _, target, _, _ in table if target is not None}
    shown = {word for _, _, _, peer, _ in table if peer is not None for word in str(peer).split()}
    for key, value in scenario.targets.items():
        assert value in targets, f"target {key} is not in the table"
    for key, value in scenario.peer.items():
        if key != "source":
            figures = value.values() if isinstance(value, dict) else [value]
            assert {str(v) for v in figures} <= shown, f"reference figure {key} is not shown"


def test_the_markdown_names_the_reference_and_judges_the_targets() -> None:
    text = report.markdown(a_run("baseline"))
    assert "this 2-core machine" in text and "50 requests/s" in text
    row = next(line for line in text.splitlines() if line.startswith("| evictions, %"))
    assert "MISSED" in row  # 25 % against 1 %
    row = next(line for line in text.splitlines() if "small, as the reference" in line)
    assert row.endswith("| 230 |")
