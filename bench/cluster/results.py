"""The results JSON of one run: its records (`Recorder`, the load's counters, /proc samples,
the API server's request counts) turned into the figures every scenario reports, and the
topology figures of a scenario with nodes. Pure: cli.py measures, this module adds up.
"""

from __future__ import annotations

import os
import platform
import resource
from typing import Any

from bench.cluster import report, stats
from bench.cluster.load import Load
from bench.cluster.procstat import ProcSample
from bench.cluster.record import Recorder
from bench.cluster.scenario import Scenario


def _cpu(before: ProcSample | None, after: ProcSample | None) -> float | None:
    if before is None or after is None:
        return None
    return after.cpu_s - before.cpu_s


HEARTBEAT_RESOURCES = frozenset({"leases", "nodes", "nodes/status"})
"""Lease and Node requests: the nodes' heartbeats (kwok renews each node's Lease every quarter
of its duration), the controller's own Lease. Counted apart so a scenario with nodes compares
with one without."""


def _topology_figures(scenario: Scenario, rec: Recorder, driver: Load) -> dict[str, Any]:
    """For a scenario with nodes: the fleet, each class's placement and its own times, and how
    many admissions came with a topology assignment (over how many nodes)."""
    if scenario.fleet is None:
        return {}
    return {
        "nodes": scenario.fleet.nodes,
        "topology_admissions": driver.topology_admissions,
        "nodes_per_admission": {str(k): v for k, v in sorted(driver.domains_used.items())},
        "placements": {
            s.cls: {
                "size": s.size_class,
                "mode": s.placement.mode if s.placement else None,
                "pods": s.pods,
                "pod_request": s.pod_request(),
            }
            for s in scenario.streams
        },
        "tta_by_class_avg_s": {k: v["avg"] for k, v in rec.tta(by_class=True).items()},
        "tta_reference_by_class_avg_s": {
            k: v["avg"] for k, v in rec.tta_reference(by_class=True).items()
        },
        "peer_here": scenario.peer_here,
        "ratio_targets": scenario.ratio_targets,
    }


def results(
    scenario: Scenario,
    rec: Recorder,
    driver: Load,
    stamp: str,
    setup_s: float,
    runner_cpu: float,
    runner_requests: int,
    api_delta: Any,
    before: dict[str, ProcSample | None],
    after: dict[str, ProcSample | None],
    all_done: bool,
    loadavg: list[float],
) -> dict[str, Any]:
    counts = rec.counts()
    tta = rec.tta()
    tta_reference = rec.tta_reference()
    total = sum(api_delta.values())
    others = max(0, total - runner_requests)
    heartbeats = sum(n for (r, _), n in api_delta.items() if r in HEARTBEAT_RESOURCES)
    ctl_after = after.get("controller")
    res: dict[str, Any] = {
        "scenario": scenario.name,
        "started_at": stamp,
        "all_finished": all_done and counts["finished"] == counts["workloads"],
        "wall_s": rec.wall(),
        "min_wall_s": scenario.min_wall_s,
        "usage_pct": rec.usage_pct(),
        "tta_avg_s": {cls: v["avg"] for cls, v in tta.items()},
        "tta_s": tta,
        "tta_reference_avg_s": {cls: v["avg"] for cls, v in tta_reference.items()},
        "tta_reference_s": tta_reference,
        "evictions_pct": 100.0 * counts["evictions"] / counts["admissions"]
        if counts["admissions"]
        else None,
        "evicted_unit_seconds": rec.evicted_unit_s,
        "evicted_work_pct": 100.0 * rec.evicted_unit_s / scenario.work_unit_seconds,
        "controller_cpu_s": _cpu(before.get("controller"), ctl_after),
        "controller_peak_rss_mb": None if ctl_after is None else ctl_after.peak_rss_mb,
        "api_requests_per_admission": others / counts["admissions"]
        if counts["admissions"]
        else None,
        "heartbeat_requests": heartbeats,
        "api_requests_per_admission_without_heartbeats": max(0, others - heartbeats)
        / counts["admissions"]
        if counts["admissions"]
        else None,
        "api_requests": {
            "total": total,
            "runner": runner_requests,
            "others": others,
            "top": [
                {"resource": r, "verb": v, "count": n} for (r, v), n in api_delta.most_common(12)
            ],
        },
        "runner_cpu_s": runner_cpu,
        "runner_peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "apiserver_cpu_s": _cpu(before.get("kube-apiserver"), after.get("kube-apiserver")),
        "etcd_cpu_s": _cpu(before.get("etcd"), after.get("etcd")),
        "counts": counts,
        "creation_lag_max_s": driver.creation_lag_max,
        "finish_latency_s": stats.spread(driver.finish_latencies),
        "runner_retries": driver.retries,
        "finish_conflicts": driver.conflicts,
        "evicted_after_runtime": driver.evicted_after_runtime,
        "watch_events": driver.watch_events,
        "setup_s": setup_s,
        "targets": scenario.targets,
        "peer": scenario.peer,
        **_topology_figures(scenario, rec, driver),
        "host": {
            "cpus": os.cpu_count(),
            "loadavg": loadavg,
            "python": platform.python_version(),
        },
    }
    return dict(report.rounded(res))
