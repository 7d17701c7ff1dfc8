"""The bypass fuzzer's figures: one row per kind (markdown), every outcome (JSON)."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from typing import Any

from bench.bypass.fuzz import RESULTS, KindReport


def table(reports: list[KindReport]) -> str:
    head = ["kind", "generated", "tried", *RESULTS, "worlds", "notes"]
    rows = [
        [
            r.kind,
            str(r.generated),
            str(len(r.outcomes)),
            *(str(r.count(x)) for x in RESULTS),
            str(r.worlds),
            r.error.replace("|", "/")[:120],
        ]
        for r in reports
    ]
    counted = range(1, len(head) - 1)  # generated .. worlds
    total = ["total", *(str(sum(int(row[i]) for row in rows)) for i in counted), ""]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(row) + " |" for row in [*rows, total[: len(head)]]]
    return "\n".join(lines)


def violations(reports: list[KindReport], limit: int = 200) -> str:
    lines = []
    for r in reports:
        for o in r.violations[:limit]:
            lines.append(f"- {r.kind} · {o.category} · {o.role}: {o.what} — {o.detail}")
    return "\n".join(lines) or "none"


def markdown(reports: list[KindReport], header: str) -> str:
    return (
        f"# Bypass fuzzer\n\n{header}\n\n{table(reports)}\n\n## Violations\n\n"
        f"{violations(reports)}\n"
    )


def as_json(reports: list[KindReport], header: dict[str, Any]) -> str:
    return json.dumps(
        {
            **header,
            "kinds": [
                {
                    "kind": r.kind,
                    "generated": r.generated,
                    "tried": len(r.outcomes),
                    **{x: r.count(x) for x in RESULTS},
                    "worlds": r.worlds,
                    "error": r.error,
                    "outcomes": [asdict(o) for o in r.outcomes],
                }
                for r in reports
            ],
        },
        indent=1,
    )


def write(out_dir: Path, stamp: str, reports: list[KindReport], header: dict[str, Any]) -> Path:
    out_dir.mkdir(parents=True, exist_ok=True)
    md = out_dir / f"bypass-{stamp}.md"
    words = ", ".join(f"{k}: {v}" for k, v in header.items())
    md.write_text(markdown(reports, words))
    (out_dir / f"bypass-{stamp}.json").write_text(as_json(reports, header))
    return md
