"""Results: the JSON (printed last and saved), a short markdown summary and a PNG plot."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from bench.cluster import ratios
from bench.cluster.record import Recorder

RESULTS_DIR = Path(__file__).resolve().parent.parent / "results"
REQUIRED = (
    "scenario",
    "wall_s",
    "usage_pct",
    "tta_avg_s",
    "tta_reference_avg_s",
    "evicted_unit_seconds",
    "webhook_probe_ms",
    "lease_renewal_max_gap_s",
    "cycle_ms",
    "controller_cpu_s",
    "controller_peak_rss_mb",
    "api_requests_per_admission",
)


def _r(x: float | None, nd: int = 2) -> float | None:
    return None if x is None else round(x, nd)


def _verdict(value: float | None, target: float | None, *, at_least: bool = False) -> str:
    if value is None or target is None:
        return ""
    ok = value >= target if at_least else value <= target
    return "met" if ok else "MISSED"


Row = tuple[str, Any, float | None, Any, bool]
"""label, queuectl's figure, target, the reference's figure, whether more is better."""

_ROWS = (
    ("evictions", "evictions"),
    ("evictions, % of admissions", "evictions_pct"),
    ("admitted unit-seconds thrown away by evictions", "evicted_unit_seconds"),
    ("evictions of work whose runtime was over (runner lag)", "evicted_after_runtime"),
    ("controller CPU (s)", "controller_cpu_s"),
    ("controller peak RSS (MB)", "controller_peak_rss_mb"),
    ("controller API requests per admission", "api_requests_per_admission"),
    ("webhook probe p99 (ms)", "webhook_probe_p99_ms"),
    ("webhook probes refused or timed out", "webhook_probe_failed"),
    ("longest gap between Lease renewals (s)", "lease_renewal_max_gap_s"),
    ("scheduling cycle p50 (ms)", "cycle_p50_ms"),
    ("scheduling cycle p99 (ms)", "cycle_p99_ms"),
)
"""(label, key): lower is better; the key names the figure, its target and its peer figure."""


def rows(res: dict[str, Any]) -> list[Row]:
    """The summary table: every figure with a target or a peer figure, in reading order."""
    t = res.get("targets") or {}
    peer = res.get("peer") or {}
    peer_tta = peer.get("tta_avg_s") or {}
    probe = res.get("webhook_probe_ms") or {}
    cycle = res.get("cycle_ms") or {}
    counts = res["counts"]
    out: list[Row] = [("wall time (s)", res["wall_s"], t.get("wall_s"), peer.get("wall_s"), False)]
    if "finished" in peer:
        within = peer.get("finished_within_s")
        peer_finished = f"{peer['finished']} in {within} s" if within else peer["finished"]
        out.append(("Workloads finished", counts["finished"], None, peer_finished, True))
    usage = res["usage_pct"]
    out.append(("ClusterQueue usage (%)", usage, t.get("usage_pct"), peer.get("usage_pct"), True))
    for cls, avg in res["tta_avg_s"].items():
        out.append((f"avg time to admission, {cls} (s)", avg, t.get(f"tta_{cls}_s"), None, False))
    for cls, avg in (res.get("tta_reference_avg_s") or {}).items():
        label = f"avg time to admission, {cls}, as the reference defines it (s)"
        out.append((label, avg, None, peer_tta.get(cls), False))
    figures = {
        **res,
        "evictions": counts["evictions"],
        "webhook_probe_p99_ms": probe.get("p99"),
        "webhook_probe_failed": probe["refused"] + probe["timed_out"] if probe else None,
        "cycle_p50_ms": cycle.get("p50"),
        "cycle_p99_ms": cycle.get("p99"),
    }
    for label, key in _ROWS:
        out.append((label, figures.get(key), t.get(key), peer.get(key), False))
    return out


def _cell(value: Any) -> str:
    return "" if value is None else str(value)


def here_rows(res: dict[str, Any]) -> list[tuple[str, Any, Any]]:
    """(label, queuectl, the reference) for the reference measured on this machine beside its
    own baseline run: our figures of this run and of the baseline run compared with."""
    here = res.get("peer_here") or {}
    if not here:
        return []
    base = (res.get("ratios") or {}).get("against") or {}
    ours_tta = res.get("tta_reference_avg_s") or {}
    base_tta = base.get("tta_reference_avg_s") or {}
    out: list[tuple[str, Any, Any]] = [
        ("wall time (s)", res["wall_s"], here.get("wall_s")),
        ("wall time of the baseline beside it (s)", base.get("wall_s"), here.get("against_wall_s")),
    ]
    for size, value in (here.get("tta_avg_s") or {}).items():
        label = f"avg time to admission, {size}, as the reference defines it (s)"
        out.append((label, ours_tta.get(size), value))
    for size, value in (here.get("against_tta_avg_s") or {}).items():
        label = f"the baseline's avg time to admission, {size}, as the reference defines it (s)"
        out.append((label, base_tta.get(size), value))
    out.append(("evictions", res["counts"]["evictions"], here.get("evictions")))
    out.append(
        (
            "controller peak RSS (MB)",
            res.get("controller_peak_rss_mb"),
            here.get("controller_peak_rss_mb"),
        )
    )
    return out


def _topology_lines(res: dict[str, Any]) -> list[str]:
    lines: list[str] = []
    placements = res.get("placements") or {}
    if placements:
        shapes = ", ".join(
            f"{cls} ({p['pods']} x {p['pod_request']}, {p['mode']})"
            for cls, p in placements.items()
        )
        lines.append(
            f"- {res.get('nodes')} nodes, Ready and settled in {res.get('nodes_ready_s')} s; "
            f"{shapes}"
        )
        lines.append(
            f"- admissions placed on nodes: {res.get('topology_admissions')} of "
            f"{res['counts']['admissions']}; nodes per admission: {res.get('nodes_per_admission')}"
        )
    by_class = res.get("tta_by_class_avg_s") or {}
    if by_class:
        lines.append(
            "- avg time to admission per class (s): "
            + ", ".join(f"{cls} {value}" for cls, value in by_class.items())
        )
    return lines


def markdown(res: dict[str, Any]) -> str:
    peer = res.get("peer") or {}
    lines = [
        f"# {res['scenario']} — {res['started_at']}",
        "",
        f"{res['counts']['workloads']} Workloads, {res['counts']['finished']} finished, "
        f"{res['counts']['admissions']} admissions, {res['counts']['evictions']} evictions; "
        f"lower bound on wall time (work / nominal quota): {res['min_wall_s']} s.",
        "",
        *(
            []
            if res.get("all_finished")
            else ["**Not every Workload finished before --timeout: figures are partial.**", ""]
        ),
        "| figure | queuectl | target | verdict | reference (Kueue) |",
        "| --- | ---: | ---: | --- | ---: |",
    ]
    for label, value, target, peer_value, at_least in rows(res):
        lines.append(
            f"| {label} | {_cell(value)} | {_cell(target)} | "
            f"{_verdict(value, target, at_least=at_least)} | {_cell(peer_value)} |"
        )
    if peer.get("source"):
        lines += ["", f"Reference figures: {peer['source']}"]
    if res.get("ratios"):
        lines += ratios.markdown(res["ratios"])
    elif res.get("ratio_targets"):
        lines += ["", f"**No ratios: {'; '.join(res.get('errors') or ['no baseline'])}**"]
    here = here_rows(res)
    if here:
        lines += [
            "",
            "| on this machine | queuectl | reference here |",
            "| --- | ---: | ---: |",
            *(f"| {label} | {_cell(ours)} | {_cell(ref)} |" for label, ours, ref in here),
            "",
            f"Reference here: {(res.get('peer_here') or {}).get('source', '')}",
        ]
    api = res["api_requests"]
    held = res.get("lease") or {}
    probe = res.get("webhook_probe_ms") or {}
    cycle = res.get("cycle_ms") or {}
    lines += [
        "",
        f"- controller: {res['controller_cpu_s']} CPU s, "
        f"peak RSS {res['controller_peak_rss_mb']} MB",
        f"- runner: {res['runner_cpu_s']} CPU s, peak RSS {res['runner_peak_rss_mb']} MB; "
        f"max creation lag {res['creation_lag_max_s']} s",
        f"- API server: {res.get('apiserver_cpu_s')} CPU s; etcd {res.get('etcd_cpu_s')} CPU s",
        f"- API requests: {api['total']} in all, {api['runner']} by the runner, "
        f"{api['others']} by the controller and the cluster "
        f"= {res['api_requests_per_admission']} per admission "
        f"({res.get('api_requests_per_admission_without_heartbeats')} without the "
        f"{res.get('heartbeat_requests')} Lease and Node requests)",
        f"- Lease: {held.get('renewals')} renewals seen, longest gap "
        f"{res.get('lease_renewal_max_gap_s')} s, lost: {held.get('lost')}",
        f"- webhook probe: {probe.get('sent')} sent, p50 {probe.get('p50')} ms, "
        f"p99 {probe.get('p99')} ms, max {probe.get('max')} ms, refused {probe.get('refused')}, "
        f"timed out {probe.get('timed_out')}",
        f"- scheduling cycles: {cycle.get('count')}, {cycle.get('total_s')} s in all, "
        f"avg {cycle.get('avg')} ms (p50/p99 interpolated in the histogram's buckets)",
        f"- machine: {res['host']['cpus']} CPUs, load average at start {res['host']['loadavg']}",
        *_topology_lines(res),
    ]
    return "\n".join(lines) + "\n"


def plot(rec: Recorder, res: dict[str, Any], path: Path) -> bool:
    """Queue depth and quota usage over time; False when matplotlib is missing."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    if not rec.timeline or rec.first_created is None:
        return False
    t0 = rec.first_created
    ts = [s[0] - t0 for s in rec.timeline]
    fig, (top, bottom) = plt.subplots(2, 1, sharex=True, figsize=(8, 5), dpi=80)
    top.plot(ts, [s[1] for s in rec.timeline], color="tab:blue", linewidth=1)
    top.set_ylabel("pending Workloads")
    top.set_title(
        f"{res['scenario']}: wall {res['wall_s']} s, usage {res['usage_pct']} %", fontsize=10
    )
    bottom.plot(
        ts, [100.0 * s[2] / rec.nominal_total for s in rec.timeline], color="tab:green", linewidth=1
    )
    bottom.axhline(100, color="grey", linestyle=":", linewidth=1)
    bottom.set_ylabel("quota in use (% of nominal)")
    bottom.set_xlabel("seconds since the first creation")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return True


def save(rec: Recorder, res: dict[str, Any], out_dir: Path = RESULTS_DIR) -> dict[str, str]:
    out_dir.mkdir(parents=True, exist_ok=True)
    stem = f"{res['scenario']}-{res['started_at'].replace(':', '').replace('-', '')}"
    paths = {"json": out_dir / f"{stem}.json", "markdown": out_dir / f"{stem}.md"}
    res["files"] = {k: str(v) for k, v in paths.items()}
    png = out_dir / f"{stem}.png"
    if plot(rec, res, png):
        res["files"]["plot"] = str(png)
    paths["json"].write_text(json.dumps(res, indent=2) + "\n")
    paths["markdown"].write_text(markdown(res))
    return res["files"]  # type: ignore[no-any-return]


def rounded(value: Any) -> Any:
    if isinstance(value, float):
        return _r(value, 3)
    if isinstance(value, dict):
        return {k: rounded(v) for k, v in value.items()}
    if isinstance(value, list):
        return [rounded(v) for v in value]
    return value
