"""Generate queuectl.json, the Grafana dashboard, from the panel list below.

Run `python deploy/dashboards/build.py` after editing; a unit test fails if the JSON drifts from
this file, and another checks every PromQL expression names a metric queuectl.metrics defines.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

OUT = Path(__file__).with_name("queuectl.json")
DS = {"type": "prometheus", "uid": "${datasource}"}
CQ = 'cluster_queue=~"$cluster_queue"'
GPU = 'resource="nvidia.com/gpu"'


def target(expr: str, legend: str = "", ref: str = "A") -> dict[str, Any]:
    return {"datasource": DS, "expr": expr, "legendFormat": legend, "refId": ref}


def panel(
    title: str,
    kind: str,
    targets: list[dict[str, Any]],
    grid: tuple[int, int, int, int],
    *,
    unit: str = "short",
    description: str = "",
    stack: bool = False,
    max_: float | None = None,
) -> dict[str, Any]:
    x, y, w, h = grid
    defaults: dict[str, Any] = {"unit": unit}
    if max_ is not None:
        defaults.update(min=0, max=max_)
    if kind == "timeseries":
        defaults["custom"] = {
            "stacking": {"mode": "normal" if stack else "none"},
            "fillOpacity": 20 if stack else 0,
        }
    for i, t in enumerate(targets):
        t["refId"] = chr(ord("A") + i)
    return {
        "title": title,
        "description": description,
        "type": kind,
        "datasource": DS,
        "gridPos": {"x": x, "y": y, "w": w, "h": h},
        "fieldConfig": {"defaults": defaults, "overrides": []},
        "options": {"legend": {"displayMode": "table", "placement": "right"}}
        if kind == "timeseries"
        else {"reduceOptions": {"calcs": ["lastNotNull"]}},
        "targets": targets,
    }


def row(title: str, y: int) -> dict[str, Any]:
    return {
        "type": "row",
        "title": title,
        "collapsed": False,
        "gridPos": {"x": 0, "y": y, "w": 24, "h": 1},
        "panels": [],
    }


def panels() -> list[dict[str, Any]]:
    return [
        row("Cluster GPUs", 0),
        panel(
            "GPU allocation (all flavors)",
            "gauge",
            [
                target(
                    'sum(queuectl_flavor_gpus{kind="allocated"}) '
                    '/ clamp_min(sum(queuectl_flavor_gpus{kind="capacity"}), 1)'
                )
            ],
            (0, 1, 6, 7),
            unit="percentunit",
            max_=1,
            description="GPUs held by admitted workloads over healthy schedulable GPUs.",
        ),
        panel(
            "GPU allocation by flavor",
            "timeseries",
            [target("queuectl_gpu_allocation_ratio", "{{flavor}}")],
            (6, 1, 9, 7),
            unit="percentunit",
            max_=1,
        ),
        panel(
            "GPUs by flavor",
            "timeseries",
            [target("queuectl_flavor_gpus", "{{flavor}} {{kind}}")],
            (15, 1, 9, 7),
        ),
        panel(
            "Fragmentation",
            "timeseries",
            [target("queuectl_gpu_fragmentation_ratio", "stranded free GPUs")],
            (0, 8, 8, 7),
            unit="percentunit",
            max_=1,
            description="Free GPUs on nodes where no pending pod's GPU request fits, over all "
            "free GPUs.",
        ),
        panel(
            "Unhealthy GPUs",
            "stat",
            [target("queuectl_unhealthy_gpus")],
            (8, 8, 4, 7),
            description="From node agents: healthy-count label and the unhealthy taint.",
        ),
        panel(
            "Unhealthy GPUs by node",
            "timeseries",
            [target("count by (node) (queuectl_gpu_healthy == 0)", "{{node}}")],
            (12, 8, 12, 7),
        ),
        row("Queues", 15),
        panel(
            "Queue depth by priority class",
            "timeseries",
            [
                target(
                    f"sum by (priority_class) (queuectl_pending_workloads{{{CQ}}})",
                    "{{priority_class}}",
                )
            ],
            (0, 16, 12, 8),
            stack=True,
        ),
        panel(
            "Pending by ClusterQueue",
            "timeseries",
            [
                target(
                    f"sum by (cluster_queue) (queuectl_pending_workloads{{{CQ}}})",
                    "{{cluster_queue}}",
                )
            ],
            (12, 16, 12, 8),
            stack=True,
        ),
        panel(
            "Admission wait time",
            "timeseries",
            [
                target(
                    f"histogram_quantile({q}, sum by (le) "
                    f"(rate(queuectl_admission_wait_time_seconds_bucket{{{CQ}}}[$__rate_interval])))",
                    f"p{int(q * 100)}",
                )
                for q in (0.5, 0.9, 0.99)
            ],
            (0, 24, 12, 8),
            unit="s",
        ),
        panel(
            "Mean wait by ClusterQueue",
            "timeseries",
            [
                target(
                    f"sum by (cluster_queue) (rate(queuectl_admission_wait_time_seconds_sum{{{CQ}}}"
                    "[$__rate_interval])) / sum by (cluster_queue) "
                    f"(rate(queuectl_admission_wait_time_seconds_count{{{CQ}}}[$__rate_interval]))",
                    "{{cluster_queue}}",
                )
            ],
            (12, 24, 12, 8),
            unit="s",
        ),
        row("Quota and teams", 32),
        panel(
            "Borrowed GPUs by team",
            "timeseries",
            [
                target(
                    f'sum by (cluster_queue) (queuectl_cluster_queue_quota{{kind="borrowed", '
                    f"{GPU}, {CQ}}})",
                    "{{cluster_queue}}",
                )
            ],
            (0, 33, 12, 8),
            stack=True,
        ),
        panel(
            "GPU quota used vs nominal",
            "timeseries",
            [
                target(
                    f'sum by (cluster_queue) (queuectl_cluster_queue_quota{{kind="used", {GPU}, '
                    f"{CQ}}})",
                    "{{cluster_queue}} used",
                ),
                target(
                    f'sum by (cluster_queue) (queuectl_cluster_queue_quota{{kind="nominal", '
                    f"{GPU}, {CQ}}})",
                    "{{cluster_queue}} nominal",
                ),
            ],
            (12, 33, 12, 8),
        ),
        panel(
            "GPU-hours by namespace (chargeback, over the range)",
            "bargauge",
            [
                target(
                    "sum by (namespace) (increase(queuectl_gpu_seconds_total[$__range])) / 3600",
                    "{{namespace}}",
                )
            ],
            (0, 41, 12, 8),
            unit="h",
        ),
        panel(
            "Admitted GPUs by ClusterQueue",
            "timeseries",
            [
                target(
                    f"sum by (cluster_queue) (rate(queuectl_gpu_seconds_total{{{CQ}}}"
                    "[$__rate_interval]))",
                    "{{cluster_queue}}",
                )
            ],
            (12, 41, 12, 8),
            stack=True,
            description="GPU-seconds per second: the GPUs each queue held on average.",
        ),
        row("Scheduler", 49),
        panel(
            "Admissions, finishes, evictions and preemptions",
            "timeseries",
            [
                target(
                    f"sum(rate(queuectl_admitted_workloads_total{{{CQ}}}[$__rate_interval]))",
                    "admitted",
                ),
                target(
                    "sum by (reason) (rate(queuectl_finished_workloads_total[$__rate_interval]))",
                    "finished {{reason}}",
                ),
                target(
                    "sum by (reason) (rate(queuectl_evicted_workloads_total[$__rate_interval]))",
                    "evicted {{reason}}",
                ),
                target(
                    "sum by (reason) (rate(queuectl_preempted_workloads_total[$__rate_interval]))",
                    "preempted {{reason}}",
                ),
            ],
            (0, 50, 12, 8),
            unit="ops",
        ),
        panel(
            "Scheduling cycle",
            "timeseries",
            [
                target(
                    "histogram_quantile(0.99, sum by (le) "
                    "(rate(queuectl_scheduling_cycle_duration_seconds_bucket[$__rate_interval])))",
                    "p99 cycle duration",
                ),
                target(
                    "sum(rate(queuectl_admissions_per_cycle_sum[$__rate_interval])) "
                    "/ sum(rate(queuectl_admissions_per_cycle_count[$__rate_interval]))",
                    "admissions per cycle",
                ),
                target("queuectl_decisions_in_flight", "decisions not yet written"),
                target(
                    "rate(queuectl_cycle_write_wait_seconds_total[$__rate_interval])",
                    "share of time cycles wait for writes",
                ),
            ],
            (12, 50, 12, 8),
        ),
        row("Use and cost", 58),
        panel(
            "GPUs allocated vs used",
            "timeseries",
            [
                target('sum(queuectl_flavor_gpus{kind="capacity"})', "capacity"),
                target('sum(queuectl_flavor_gpus{kind="allocated"})', "allocated"),
                target("sum(queuectl_gpu_utilization_ratio)", "used (busy GPU-equivalents)"),
            ],
            (0, 59, 12, 8),
            description="Allocated: GPUs held by admitted workloads. Used: the sum of each "
            "GPU's utilization as node agents read it from NVML, where they report it. Until "
            "nodes report utilization the used line is absent and use means allocation: "
            "allocated is then the only measure of use this dashboard has.",
        ),
        panel(
            "Cost by team (over the range)",
            "bargauge",
            [
                target(
                    "sum by (namespace, currency) (increase(queuectl_gpu_cost_total[$__range]))",
                    "{{namespace}} ({{currency}})",
                )
            ],
            (12, 59, 12, 8),
            description="GPU-seconds held on flavors with a price (ResourceFlavor spec.cost), "
            "at the price in force when each second was charged. Flavors without a price are "
            "not shown; queuectl report gives the same per team from the Workloads.",
        ),
        panel(
            "Spend per hour by team",
            "timeseries",
            [
                target(
                    "sum by (namespace, currency) "
                    "(rate(queuectl_gpu_cost_total[$__rate_interval])) * 3600",
                    "{{namespace}} ({{currency}})",
                )
            ],
            (0, 67, 12, 8),
            stack=True,
            description="What each team's held GPUs cost per hour at their flavors' prices.",
        ),
        panel(
            "Cost by ClusterQueue and flavor (over the range)",
            "bargauge",
            [
                target(
                    f"sum by (cluster_queue, flavor, currency) "
                    f"(increase(queuectl_gpu_cost_total{{{CQ}}}[$__range]))",
                    "{{cluster_queue}} on {{flavor}} ({{currency}})",
                )
            ],
            (12, 67, 12, 8),
        ),
        panel(
            "GPUs held vs used by ClusterQueue (agents' reports)",
            "timeseries",
            [
                target(
                    f"sum by (cluster_queue) (queuectl_gpus_allocated{{{CQ}}})",
                    "{{cluster_queue}} held",
                ),
                target(
                    f"sum by (cluster_queue) (queuectl_gpus_used{{{CQ}}})", "{{cluster_queue}} used"
                ),
            ],
            (0, 75, 12, 8),
            description="Held: GPUs the kubelets gave to each queue's pods, from the node "
            "agents' PodResources reports. Used: those GPUs weighted by their utilization "
            "(busy GPU-equivalents). The gap is what idles.",
        ),
        panel(
            "Idle GPU-hours by team (over the range)",
            "bargauge",
            [
                target(
                    f"sum by (cluster_queue) "
                    f"(increase(queuectl_idle_gpu_seconds_total{{{CQ}}}[$__range])) / 3600",
                    "{{cluster_queue}}",
                )
            ],
            (12, 75, 12, 8),
            description="GPU-hours held while under the ClusterQueue's idle threshold (5 % "
            "without an idle policy).",
        ),
    ]


def dashboard() -> dict[str, Any]:
    return {
        "title": "queuectl",
        "uid": "queuectl-overview",
        "description": "GPU queueing: allocation, queue depth, wait times, borrowing, "
        "fragmentation, GPU health, use and cost. No idle GPU-hours by team yet: no metric "
        "joins a GPU's utilization to the workload holding it.",
        "tags": ["queuectl", "gpu", "batch"],
        "timezone": "browser",
        "schemaVersion": 39,
        "version": 1,
        "refresh": "30s",
        "time": {"from": "now-6h", "to": "now"},
        "templating": {
            "list": [
                {
                    "name": "datasource",
                    "label": "Prometheus",
                    "type": "datasource",
                    "query": "prometheus",
                },
                {
                    "name": "cluster_queue",
                    "label": "ClusterQueue",
                    "type": "query",
                    "datasource": DS,
                    "query": {
                        "query": "label_values(queuectl_cluster_queue_quota, cluster_queue)",
                        "refId": "cq",
                    },
                    "definition": "label_values(queuectl_cluster_queue_quota, cluster_queue)",
                    "includeAll": True,
                    "multi": True,
                    "allValue": ".*",
                    "current": {"text": "All", "value": "$__all"},
                    "refresh": 2,
                },
            ]
        },
        "panels": panels(),
    }


def render() -> str:
    return json.dumps(dashboard(), indent=2) + "\n"


if __name__ == "__main__":
    OUT.write_text(render())
    sys.stdout.write(f"wrote {OUT}\n")
