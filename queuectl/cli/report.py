"""`queuectl report --since 7d [--by namespace|clusterqueue|flavor|workload] [-o table|csv|json]`:
GPU-hours and their cost for chargeback, from the Workloads the cluster holds now.

Each Workload's held intervals (`_usage`) are clipped to the window and priced at each
flavor's spec.cost as it stands now (`core.cost`). Deleted Workloads are gone, and with them
their hours: for windows longer than the cluster keeps finished Workloads, read the
controller's counters instead (`PROMQL` below).
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import re
import sys
import time
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, Final

from queuectl.api import resource as rest
from queuectl.cli import _usage
from queuectl.cli._common import add_connection_args, connect, guarded
from queuectl.cli._render import Term, table
from queuectl.cli.main import Subparsers
from queuectl.core import cost
from queuectl.core.cost import GROUP_BYS, GroupBy, Row

UNITS: Final = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
MAX_WINDOW: Final = 3650 * 86400.0
_DURATION = re.compile(r"(\d+(?:\.\d+)?)([smhdw])")
BY_ALIASES: Final[Mapping[str, GroupBy]] = {
    **{b: b for b in GROUP_BYS},
    "ns": "namespace",
    "team": "namespace",
    "cq": "clusterqueue",
    "cluster-queue": "clusterqueue",
    "rf": "flavor",
    "wl": "workload",
}
COLUMN: Final[Mapping[GroupBy, str]] = {
    "namespace": "namespace",
    "clusterqueue": "cluster_queue",
    "flavor": "flavor",
    "workload": "workload",
}
JSON_KEY: Final[Mapping[GroupBy, str]] = {**COLUMN, "clusterqueue": "clusterQueue"}
PRICING: Final = "each flavor's GPU-hours at its spec.cost price now (history is re-priced)"
LIMITS: Final = (
    "from the Workloads the cluster holds now: deleted ones are gone with their hours; "
    "for long windows ask Prometheus"
)
PROMQL: Final[Mapping[GroupBy, str]] = {
    "namespace": "sum by (namespace, currency) (increase(queuectl_gpu_cost_total[{w}]))",
    "clusterqueue": "sum by (cluster_queue, currency) (increase(queuectl_gpu_cost_total[{w}]))",
    "flavor": "sum by (flavor, currency) (increase(queuectl_gpu_cost_total[{w}]))",
    "workload": "sum by (namespace, cluster_queue, currency) (increase(queuectl_gpu_cost_total"
    "[{w}])) (the counters carry no workload label: one series per workload would not scale)",
}


def duration(text: str) -> float:
    """`7d`, `12h`, `1d12h`, `90m`, `1w` -> seconds; anything else is refused, saying how."""
    s = text.strip().lower()
    parts = _DURATION.findall(s)
    if not parts or "".join(n + u for n, u in parts) != s:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a duration: give a number and a unit (s, m, h, d or w), "
            "such as 7d, 12h or 1d12h"
        )
    seconds = sum(float(n) * UNITS[u] for n, u in parts)
    if seconds <= 0:
        raise argparse.ArgumentTypeError(f"{text!r} is an empty window: give a positive duration")
    if seconds > MAX_WINDOW:
        raise argparse.ArgumentTypeError(
            f"{text!r} is longer than 10 years: give a shorter window, such as 365d"
        )
    return seconds


def group_by(text: str) -> GroupBy:
    found = BY_ALIASES.get(text.strip().lower())
    if found is None:
        raise argparse.ArgumentTypeError(
            f"unknown grouping {text!r}: use one of {', '.join(GROUP_BYS)}"
        )
    return found


def add_parser(subparsers: Subparsers) -> None:
    p = subparsers.add_parser(
        "report",
        help="GPU-hours and cost per namespace, queue, flavor or workload (chargeback)",
        description="GPU-hours held by admitted workloads and their cost (each flavor's "
        "spec.cost.gpuHourPrice) over a window ending now, from the Workloads the cluster "
        "holds. " + LIMITS + ".",
    )
    p.add_argument(
        "--since",
        type=duration,
        default="7d",  # argparse runs `duration` on it
        metavar="DURATION",
        help="window ending now: 7d, 12h, 1d12h, 90m, 1w (default 7d)",
    )
    p.add_argument(
        "--by",
        type=group_by,
        default="namespace",
        metavar="GROUP",
        help="one row per namespace (default), clusterqueue, flavor or workload",
    )
    p.add_argument(
        "-o", "--output", choices=("table", "csv", "json"), default="table", help="output format"
    )
    add_connection_args(p, namespaced=False)
    p.add_argument("-n", "--namespace", help="only this namespace's workloads (default: all)")
    p.set_defaults(func=run)


@guarded
def run(args: argparse.Namespace) -> int:
    api = connect(args)
    try:
        workloads = api.list(rest.WORKLOADS, args.namespace or None)
        flavors = api.list(rest.RESOURCE_FLAVORS)
    finally:
        api.close()
    until = time.time()
    since = until - args.since
    rows = compute(workloads, flavors, args.by, since, until)
    print(render(rows, args.by, args.output, since, until, Term.detect(sys.stdout)))
    return 0


def compute(
    workloads: Iterable[Mapping[str, Any]],
    flavors: Iterable[Mapping[str, Any]],
    by: GroupBy,
    since: float,
    until: float,
) -> list[Row]:
    return cost.report(_usage.held_all(workloads, until), _usage.prices(flavors), by, since, until)


def _iso(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _window(since: float, until: float) -> str:
    hours = (until - since) / 3600
    return f"{hours / 24:g}d" if hours % 24 == 0 else f"{round(hours * 60)}m"


def render(
    rows: Sequence[Row], by: GroupBy, output: str, since: float, until: float, term: Term
) -> str:
    if output == "json":
        return json.dumps(_json(rows, by, since, until), indent=2)
    if output == "csv":
        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        w.writerow([COLUMN[by], "gpu_hours", "cost", "currency"])
        for r in rows:
            w.writerow([r.key, f"{r.gpu_hours:.4f}", f"{r.cost:.4f}", r.currency])
        return buf.getvalue().rstrip("\n")
    lines = [f"GPU-hours and cost from {_iso(since)} to {_iso(until)}; {PRICING}.", ""]
    if rows:
        body = [[r.key, f"{r.gpu_hours:.2f}", f"{r.cost:.2f}", r.currency or "-"] for r in rows]
        body += [
            [t.key, f"{t.gpu_hours:.2f}", f"{t.cost:.2f}", t.currency or "-"]
            for t in cost.totals(rows)
        ]
        lines.append(table([by.upper(), "GPU-HOURS", "COST", "CURRENCY"], body, term))
    else:
        lines.append("  (no GPU-hours in this window)")
    window = _window(since, until)
    lines += ["", f"Note: {LIMITS}: {PROMQL[by].replace('{w}', window)}"]
    return "\n".join(lines)


def _json(rows: Sequence[Row], by: GroupBy, since: float, until: float) -> dict[str, Any]:
    def record(r: Row, key: str) -> dict[str, Any]:
        return {
            key: r.key,
            "gpuHours": round(r.gpu_hours, 4),
            "cost": round(r.cost, 4),
            "currency": r.currency,
        }

    return {
        "since": _iso(since),
        "until": _iso(until),
        "by": by,
        "pricing": PRICING,
        "rows": [record(r, JSON_KEY[by]) for r in rows],
        "totals": [
            {k: v for k, v in record(t, "key").items() if k != "key"} for t in cost.totals(rows)
        ],
    }
