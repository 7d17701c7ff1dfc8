"""The benchmark runner keeps working: the smoke scenario against the session's control plane.

It runs `python -m bench run smoke` as a user would (its own controller child process), and
checks the results it prints and saves. Figures are reported, never asserted: no timing here.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from queuectl.testenv import Cluster

REPO = Path(__file__).resolve().parents[2]
REQUIRED = (
    "scenario",
    "wall_s",
    "usage_pct",
    "tta_avg_s",
    "controller_cpu_s",
    "controller_peak_rss_mb",
    "api_requests_per_admission",
)


def test_smoke_scenario_runs_to_completion_and_reports_every_figure(
    control_plane: Cluster, tmp_path: Path
) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "bench", "run", "smoke",
         "--kubeconfig", control_plane.kubeconfig, "--out", str(tmp_path), "--timeout", "240"],
        cwd=REPO, capture_output=True, text=True, timeout=420, check=False,
    )  # fmt: skip
    assert done.returncode == 0, f"bench run failed:\n{done.stderr[-3000:]}"
    printed = json.loads(done.stdout)  # progress goes to stderr; stdout is the results JSON

    missing = [k for k in REQUIRED if printed.get(k) is None]
    assert not missing, f"results lack {missing}"
    assert printed["scenario"] == "smoke"
    assert printed["all_finished"] is True
    counts = printed["counts"]
    assert counts["workloads"] == 32  # 1 cohort x 2 ClusterQueues x (10 + 4 + 2)
    assert counts["finished"] == counts["created"] == counts["workloads"]
    assert set(printed["tta_avg_s"]) == {"small", "medium", "large"}
    assert 0 < printed["usage_pct"] <= 100

    saved = json.loads(Path(printed["files"]["json"]).read_text())
    assert saved == printed
    assert Path(printed["files"]["markdown"]).read_text().startswith("# smoke")
