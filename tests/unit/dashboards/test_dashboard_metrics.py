"""The Grafana dashboard only asks for series queuectl exports, with labels those series carry.

Every PromQL expression in deploy/dashboards/queuectl.json (panel targets and template queries)
is parsed for the metric names it selects; each must be a name a queuectl registry exposes
(counters as `_total`, histograms as `_bucket`/`_sum`/`_count`), and every label it matches or
groups by must be one of that metric's labels.
"""

from __future__ import annotations

import importlib.util
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.metrics import MetricWrapperBase

from queuectl import metrics

ROOT = Path(__file__).resolve().parents[3]
DASHBOARD = ROOT / "deploy" / "dashboards" / "queuectl.json"
BUILDER = ROOT / "deploy" / "dashboards" / "build.py"

KEYWORDS = frozenset(
    {"by", "without", "on", "ignoring", "group_left", "group_right", "and", "or", "unless",
     "bool", "offset", "inf", "nan"}
)  # fmt: skip
_IDENT = r"[A-Za-z_:][A-Za-z0-9_:]*"
_SELECTOR = re.compile(rf"({_IDENT})\s*\{{([^}}]*)\}}")
_MATCHER = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)\s*(?:=~|!~|!=|=)")
_GROUPING = re.compile(r"\b(by|without|on|ignoring|group_left|group_right)\s*\(([^)]*)\)")


def metric_names(expr: str) -> set[str]:
    """Names of the series an expression selects (not functions, keywords or labels)."""
    text = re.sub(r"\{[^}]*\}", " ", expr)  # label matchers (and the strings inside them)
    text = re.sub(r'"[^"]*"', " ", text)  # string arguments (label_replace ...)
    text = re.sub(r"\[[^\]]*\]", " ", text)  # range selectors [5m], [$__rate_interval]
    text = _GROUPING.sub(" ", text)
    text = re.sub(r"\$\{?\w+\}?", " ", text)  # Grafana variables
    names = set()
    for m in re.finditer(rf"(?<![\w.]){_IDENT}", text):
        rest = text[m.end() :].lstrip()
        if rest.startswith("(") or m.group(0).lower() in KEYWORDS:
            continue
        names.add(m.group(0))
    return names


def labels_used(expr: str) -> dict[str, set[str]]:
    """metric -> label names in its matchers; '*' -> labels in by/without/on clauses."""
    out: dict[str, set[str]] = {}
    for m in _SELECTOR.finditer(expr):
        out.setdefault(m.group(1), set()).update(_MATCHER.findall(m.group(2)))
    for m in _GROUPING.finditer(expr):
        out.setdefault("*", set()).update(x.strip() for x in m.group(2).split(",") if x.strip())
    return out


def exported() -> dict[str, set[str]]:
    """Every series name queuectl exposes -> its label names."""
    out: dict[str, set[str]] = {}
    for obj in vars(metrics).values():
        if not isinstance(obj, MetricWrapperBase):
            continue
        name, kind = obj._name, obj._type
        labels = set(obj._labelnames)
        if kind == "counter":
            out[f"{name}_total"] = labels
        elif kind == "histogram":
            out[f"{name}_bucket"] = labels | {"le"}
            out[f"{name}_sum"] = labels
            out[f"{name}_count"] = labels
        else:
            out[name] = labels
    collector_labels = set(metrics.GPU_LABELS) | {"type"}
    for family in metrics.GPU_COLLECTOR.collect():
        suffix = "_total" if family.type == "counter" else ""
        out.setdefault(family.name + suffix, collector_labels)
    for family in metrics.HELD_GPU_COLLECTOR.collect():  # each family its own labels
        out.setdefault(family.name, set(family._labelnames))
    return out


def expressions(dashboard: dict[str, Any]) -> Iterator[str]:
    def walk(panels: list[dict[str, Any]]) -> Iterator[str]:
        for p in panels:
            for t in p.get("targets") or ():
                yield t["expr"]
            yield from walk(p.get("panels") or [])

    yield from walk(dashboard["panels"])
    for var in dashboard.get("templating", {}).get("list", []):
        query = var.get("query")
        text = query.get("query") if isinstance(query, dict) else None
        if var.get("type") == "query" and text:
            m = re.fullmatch(r"label_values\((\w+)\s*,\s*(\w+)\)", text)
            assert m, f"template query {text!r} is not label_values(metric, label)"
            yield f'{m.group(1)}{{{m.group(2)}=~".*"}}'


@pytest.fixture(scope="module")
def dashboard() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(DASHBOARD.read_text())
    return loaded


# --- the parser itself ----------------------------------------------------------------------
@pytest.mark.parametrize(
    ("expr", "names"),
    [
        ("queuectl_unhealthy_gpus", {"queuectl_unhealthy_gpus"}),
        (
            'sum by (priority_class) (queuectl_pending_workloads{cluster_queue=~"$cq"})',
            {"queuectl_pending_workloads"},
        ),
        (
            'histogram_quantile(0.99, sum by (le) (rate(x_seconds_bucket{a="b"}[5m])))',
            {"x_seconds_bucket"},
        ),
        ('sum(a) / clamp_min(sum(b{kind="capacity"}), 1) * 100', {"a", "b"}),
        ("count by (node) (queuectl_gpu_healthy == 0)", {"queuectl_gpu_healthy"}),
        ("increase(c_total[$__range]) / 3600", {"c_total"}),
        ("a and on (x) b offset 5m", {"a", "b"}),
    ],
)
def test_parser_finds_exactly_the_selected_series(expr: str, names: set[str]) -> None:
    assert metric_names(expr) == names


def test_parser_reads_matcher_and_grouping_labels() -> None:
    used = labels_used('sum by (cluster_queue) (m{kind="used", resource="x"}) or n{a!~"b"}')
    assert used == {"m": {"kind", "resource"}, "n": {"a"}, "*": {"cluster_queue"}}


def test_an_invented_metric_would_be_caught() -> None:
    assert not metric_names("rate(queuectl_made_up_total[5m])") <= set(exported())


def test_exported_names_follow_prometheus_suffixes() -> None:
    names = exported()
    assert "queuectl_admitted_workloads_total" in names
    assert "queuectl_admission_wait_time_seconds_bucket" in names
    assert "le" in names["queuectl_admission_wait_time_seconds_bucket"]
    assert "queuectl_admission_wait_time_seconds" not in names
    assert "queuectl_gpu_ecc_errors_total" in names


# --- the dashboard ----------------------------------------------------------------------------
def test_every_expression_names_only_exported_metrics(dashboard: dict[str, Any]) -> None:
    known = exported()
    exprs = list(expressions(dashboard))
    assert len(exprs) >= 15
    for expr in exprs:
        names = metric_names(expr)
        assert names, f"no metric in {expr!r}"
        unknown = names - set(known)
        assert not unknown, f"{expr!r} reads {sorted(unknown)}, which queuectl does not export"


def test_every_label_matched_or_grouped_exists(dashboard: dict[str, Any]) -> None:
    known = exported()
    for expr in expressions(dashboard):
        used = labels_used(expr)
        selected = metric_names(expr)
        available = set().union(*(known[n] for n in selected))
        for metric, labels in used.items():
            have = available if metric == "*" else known[metric]
            assert labels <= have, f"{expr!r}: labels {sorted(labels - have)} not on {metric}"


def test_dashboard_covers_what_issue_5_asks_for(dashboard: dict[str, Any]) -> None:
    read = set().union(*(metric_names(e) for e in expressions(dashboard)))
    for needed in (
        "queuectl_gpu_allocation_ratio",  # cluster-wide allocation
        "queuectl_pending_workloads",  # queue depth by priority
        "queuectl_admission_wait_time_seconds_bucket",  # wait times
        "queuectl_cluster_queue_quota",  # borrowed quota by team
        "queuectl_gpu_fragmentation_ratio",
        "queuectl_unhealthy_gpus",
    ):
        assert needed in read


def test_dashboard_shows_cost_and_allocation_against_use(dashboard: dict[str, Any]) -> None:
    read = set().union(*(metric_names(e) for e in expressions(dashboard)))
    assert {"queuectl_gpu_cost_total", "queuectl_gpu_utilization_ratio"} <= read
    by_team = [e for e in expressions(dashboard) if "queuectl_gpu_cost_total" in e]
    assert any(labels_used(e).get("*", set()) >= {"namespace", "currency"} for e in by_team)


def test_json_is_what_build_py_generates() -> None:
    spec = importlib.util.spec_from_file_location("dashboard_build", BUILDER)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert DASHBOARD.read_text() == module.render(), "run: python deploy/dashboards/build.py"


def test_panels_do_not_overlap(dashboard: dict[str, Any]) -> None:
    cells: dict[tuple[int, int], str] = {}
    for p in dashboard["panels"]:
        g = p["gridPos"]
        assert g["x"] + g["w"] <= 24, p["title"]
        for x in range(g["x"], g["x"] + g["w"]):
            for y in range(g["y"], g["y"] + g["h"]):
                assert (x, y) not in cells, f"{p['title']} overlaps {cells[(x, y)]}"
                cells[(x, y)] = p["title"]
