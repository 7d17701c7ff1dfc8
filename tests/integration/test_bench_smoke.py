"""The benchmark runner keeps working: the smoke scenario against the session's control plane,
then the topology path (tas-smoke: kwok nodes, a Topology, every placement kind) beside it.

It runs `python -m bench run smoke` as a user would (its own controller child process), and
checks the results it prints and saves: every figure present and consistent with the others.
Figures are reported, never asserted against a speed: no timing here.
"""

from __future__ import annotations

import json
import subprocess
import sys
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from bench.cluster.report import REQUIRED
from queuectl.testenv import Cluster, eventually

REPO = Path(__file__).resolve().parents[2]
CLASSES = {"small", "medium", "large"}


def bench_run(kubeconfig: str, out: Path, *args: str) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, "-m", "bench", "run", *args,
         "--kubeconfig", kubeconfig, "--out", str(out), "--timeout", "240"],
        cwd=REPO, capture_output=True, text=True, timeout=420, check=False,
    )  # fmt: skip
    assert done.returncode == 0, f"bench run failed:\n{done.stderr[-3000:]}"
    printed: dict[str, Any] = json.loads(done.stdout)  # progress goes to stderr
    return printed


@pytest.fixture(scope="module")
def smoke_run(control_plane: Cluster, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return bench_run(control_plane.kubeconfig, tmp_path_factory.mktemp("bench"), "smoke")


def test_smoke_scenario_runs_to_completion_and_reports_every_figure(
    smoke_run: dict[str, Any],
) -> None:
    printed = smoke_run

    missing = [k for k in REQUIRED if printed.get(k) is None]
    assert not missing, f"results lack {missing}"
    assert printed["scenario"] == "smoke"
    assert printed["all_finished"] is True
    counts = printed["counts"]
    assert counts["workloads"] == 32  # 1 cohort x 2 ClusterQueues x (10 + 4 + 2)
    assert counts["finished"] == counts["created"] == counts["workloads"]
    assert set(printed["tta_avg_s"]) == CLASSES
    assert 0 < printed["usage_pct"] <= 100

    # time to admission as the reference defines it: whole seconds from the API's own times
    assert set(printed["tta_reference_avg_s"]) == CLASSES
    assert all(v >= 0 for v in printed["tta_reference_avg_s"].values())
    # admitted work thrown away: none without an eviction
    assert printed["evicted_unit_seconds"] >= 0
    assert counts["evictions"] > 0 or printed["evicted_unit_seconds"] == 0
    assert printed["evictions_pct"] == round(100 * counts["evictions"] / counts["admissions"], 3)

    # the webhook answered every probe it got in time, over verified TLS
    probe = printed["webhook_probe_ms"]
    assert probe["sent"] >= 1
    assert probe["refused"] == 0, probe.get("errors")
    assert 0 < probe["p50"] <= probe["p99"] <= probe["max"]

    # the controller held its Lease throughout, renewing it
    lease = printed["lease"]
    assert lease["lost"] is False, lease
    assert lease["renewals"] >= 1 and len(lease["holders"]) == 1
    assert printed["lease_renewal_max_gap_s"] == lease["max_gap_s"] > 0

    # the scheduling cycles of the load, from the controller's histogram
    cycle = printed["cycle_ms"]
    assert cycle["count"] >= 1
    assert 0 < cycle["p50"] <= cycle["p99"]

    saved = json.loads(Path(printed["files"]["json"]).read_text())
    assert saved == printed
    summary = Path(printed["files"]["markdown"]).read_text()
    assert summary.startswith("# smoke")
    assert "as the reference defines it" in summary and "webhook probe p99" in summary


def test_tas_smoke_places_every_kind_on_its_nodes_and_compares_with_the_smoke_run(
    control_plane: Cluster, smoke_run: dict[str, Any], tmp_path: Path
) -> None:
    printed = bench_run(
        control_plane.kubeconfig, tmp_path, "tas-smoke", "--against", smoke_run["files"]["json"]
    )
    missing = [k for k in REQUIRED if printed.get(k) is None]
    assert not missing, f"results lack {missing}"
    assert printed["scenario"] == "tas-smoke" and printed["all_finished"] is True
    counts = printed["counts"]
    assert counts["workloads"] == 26  # 1 cohort x 2 ClusterQueues x (4 + 4 + 3 + 2)
    assert counts["finished"] == counts["created"] == counts["workloads"]
    assert printed["nodes"] == 6 and printed["nodes_ready_s"] >= 0
    assert set(printed["tta_avg_s"]) == CLASSES  # by size, comparable with the smoke run's
    assert set(printed["tta_by_class_avg_s"]) == set(printed["placements"])
    modes = {p["mode"] for p in printed["placements"].values()}
    assert modes == {"required", "preferred", "balanced"}
    assert printed["heartbeat_requests"] >= 0
    # every admission was placed on the run's nodes, by the topology path
    assert printed["topology_admissions"] == counts["admissions"]
    assert sum(printed["nodes_per_admission"].values()) == counts["admissions"]

    ratios = printed["ratios"]
    assert ratios["against"]["file"] == smoke_run["files"]["json"]
    assert ratios["wall_s"]["ours"] == round(printed["wall_s"] / smoke_run["wall_s"], 3)
    assert set(ratios["tta_by_size"]) == CLASSES and len(ratios["tta_by_class"]) == 4
    summary = Path(printed["files"]["markdown"]).read_text()
    assert "ratio to the baseline beside it" in summary

    # the run's nodes and Topology are gone with it
    def left(kind: str) -> str:
        listed = control_plane.kubectl("get", kind, "-l", "bench.queuectl.io/run", "-o", "name")
        return listed.stdout.strip()

    for kind in ("nodes", "topologies.queuectl.io"):
        eventually(partial(left, kind), lambda out: out == "", timeout=60, what=f"{kind} deleted")
