"""One self-contained HTML report: inline SVG plots and tables, no script from the network.

Plots: GPU allocation over time (one line per run), waits per team (p50/p95/p99 bars per run),
and queue depth by priority class over time (one chart per run). With two runs (`--compare`)
the summary table puts them side by side and highlights every figure that differs. A small
inline script counts the plots that drew (`data-plots` on <body>) so a headless browser can tell
that the report rendered.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from typing import Any

from queuectl.sim.compare import rows
from queuectl.sim.engine import SimResult

W, H, PAD = 760, 260, 44
COLORS = ("#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#17becf")

Run = tuple[str, SimResult]


def _esc(text: object) -> str:
    return html.escape(str(text), quote=True)


def _axes(title: str, ymax: float, xlabel: str, ylabel: str) -> list[str]:
    out = [
        f'<svg class="plot" viewBox="0 0 {W} {H}" width="{W}" height="{H}" role="img" '
        f'aria-label="{_esc(title)}" xmlns="http://www.w3.org/2000/svg">',
        f'<text x="{W / 2}" y="16" text-anchor="middle" class="title">{_esc(title)}</text>',
        f'<line x1="{PAD}" y1="{H - PAD}" x2="{W - 10}" y2="{H - PAD}" class="axis"/>',
        f'<line x1="{PAD}" y1="24" x2="{PAD}" y2="{H - PAD}" class="axis"/>',
        f'<text x="{W / 2}" y="{H - 8}" text-anchor="middle">{_esc(xlabel)}</text>',
        f'<text x="12" y="{H / 2}" transform="rotate(-90 12 {H / 2})" text-anchor="middle">'
        f"{_esc(ylabel)}</text>",
    ]
    for i in range(5):
        v = ymax * i / 4
        y = _y(v, ymax)
        out.append(f'<text x="{PAD - 4}" y="{y + 4:.1f}" text-anchor="end">{v:g}</text>')
        out.append(f'<line x1="{PAD}" y1="{y:.1f}" x2="{W - 10}" y2="{y:.1f}" class="grid"/>')
    return out


def _y(v: float, ymax: float) -> float:
    return H - PAD - (v / ymax if ymax > 0 else 0.0) * (H - PAD - 24)


def _x(i: int, n: int) -> float:
    return PAD + (i / max(1, n - 1)) * (W - 10 - PAD)


def _legend(names: Sequence[str]) -> str:
    items = "".join(
        f'<span><i style="background:{COLORS[i % len(COLORS)]}"></i>{_esc(n)}</span>'
        for i, n in enumerate(names)
    )
    return f'<div class="legend">{items}</div>'


def _lines(
    title: str,
    series: Sequence[tuple[str, Sequence[float]]],
    hours: float,
    ylabel: str,
    ymax: float | None = None,
) -> str:
    top = ymax or max((max(v, default=0.0) for _, v in series), default=0.0) or 1.0
    out = _axes(title, top, f"virtual time (0 to {hours:.1f} h)", ylabel)
    for i, (_, values) in enumerate(series):
        n = len(values)
        pts = " ".join(f"{_x(j, n):.1f},{_y(v, top):.1f}" for j, v in enumerate(values))
        color = COLORS[i % len(COLORS)]
        out.append(f'<polyline points="{pts}" fill="none" stroke="{color}" stroke-width="1.5"/>')
    out.append("</svg>")
    return "\n".join(out) + _legend([name for name, _ in series])


def _waits(runs: Sequence[Run]) -> str:
    teams = sorted({t for _, r in runs for t in _get(r.summary, "wait_seconds", "teams")})
    bars = [
        (t, label, _get(r.summary, "wait_seconds", "teams").get(t, {}))
        for t in teams
        for label, r in runs
    ]
    top = max((b.get("p99", 0.0) for _, _, b in bars), default=0.0) / 60 or 1.0
    out = _axes(
        "Wait before first admission per team (p50 | p95 | p99)",
        top,
        "team (one group of bars per run)",
        "minutes",
    )
    slot = (W - 10 - PAD) / max(1, len(bars))
    for i, (team, _, b) in enumerate(bars):
        run_index = i % len(runs)
        color = COLORS[run_index % len(COLORS)]
        for k, (q, opacity) in enumerate((("p50", 1.0), ("p95", 0.6), ("p99", 0.3))):
            v = b.get(q, 0.0) / 60
            x = PAD + i * slot + 4 + k * (slot - 8) / 3
            y = _y(v, top)
            out.append(
                f'<rect x="{x:.1f}" y="{y:.1f}" width="{max(1.0, (slot - 8) / 3 - 1):.1f}" '
                f'height="{H - PAD - y:.1f}" fill="{color}" fill-opacity="{opacity}">'
                f"<title>{_esc(team)} {q}: {v:.1f} min</title></rect>"
            )
        if run_index == 0:
            out.append(
                f'<text x="{PAD + (i + len(runs) / 2) * slot:.1f}" y="{H - PAD + 14}" '
                f'text-anchor="middle">{_esc(team)}</text>'
            )
    out.append("</svg>")
    return "\n".join(out) + _legend([label for label, _ in runs])


def _depth(label: str, result: SimResult) -> str:
    s = result.recorder.series
    classes = sorted({c for d in s.depth for c in d})
    series = [(c, [float(d.get(c, 0)) for d in s.depth]) for c in classes]
    hours = len(s.depth) * s.width / 3600
    if not series:
        series = [("(none)", [0.0])]
    return _lines(f"Pending jobs by priority class: {label}", series, hours, "jobs")


def _get(summary: dict[str, Any], *path: str) -> dict[str, Any]:
    node: Any = summary
    for p in path:
        node = node.get(p, {}) if isinstance(node, dict) else {}
    return node if isinstance(node, dict) else {}


def _table(runs: Sequence[Run]) -> str:
    head = "".join(f"<th>{_esc(label)}</th>" for label, _ in runs)
    out = []
    for key, values, differs in rows([r.summary for _, r in runs]):
        cls = ' class="diff"' if differs else ""
        cells = "".join(f"<td>{_esc(v)}</td>" for v in values)
        out.append(f"<tr{cls}><th>{_esc(key)}</th>{cells}</tr>")
    return f"<table><tr><th>figure</th>{head}</tr>{''.join(out)}</table>"


_STYLE = """
body{font-family:sans-serif;margin:24px;color:#222}
svg.plot{display:block;margin:12px 0 2px;background:#fff;border:1px solid #ddd}
svg text{font-size:11px;fill:#333} svg text.title{font-size:13px;font-weight:bold}
.axis{stroke:#333} .grid{stroke:#eee}
.legend span{margin-right:16px;font-size:12px}
.legend i{display:inline-block;width:10px;height:10px;margin-right:4px}
table{border-collapse:collapse;font-size:12px;margin-top:16px}
td,th{border:1px solid #ddd;padding:2px 8px;text-align:left}
tr.diff td{background:#fff3b0;font-weight:bold}
"""

_SCRIPT = """
document.addEventListener('DOMContentLoaded', function () {
  var drawn = 0;
  document.querySelectorAll('svg.plot').forEach(function (svg) {
    var box = svg.getBBox();
    if (box.width > 0 && box.height > 0 && svg.querySelector('polyline,rect')) { drawn++; }
  });
  document.body.setAttribute('data-plots', String(drawn));
});
"""


def render(runs: Sequence[Run], title: str = "queuectl simulate") -> str:
    """The whole report as one HTML string."""
    hours = max(len(r.recorder.series.alloc) * r.recorder.series.width / 3600 for _, r in runs)
    alloc = _lines(
        "GPU allocation over time",
        [(label, r.recorder.series.alloc_pct()) for label, r in runs],
        hours,
        "% of healthy GPUs",
        ymax=100.0,
    )
    parts = [alloc, _waits(runs), *(_depth(label, r) for label, r in runs), _table(runs)]
    names = " vs ".join(label for label, _ in runs)
    return (
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
        f"<title>{_esc(title)}: {_esc(names)}</title><style>{_STYLE}</style>"
        f'<script>{_SCRIPT}</script></head><body data-plots="0">'
        f"<h1>{_esc(title)}</h1><p>{_esc(names)}"
        + (" (highlighted rows differ)" if len(runs) > 1 else "")
        + "</p>"
        + "\n".join(parts)
        + "</body></html>\n"
    )
