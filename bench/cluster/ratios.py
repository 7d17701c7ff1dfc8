"""Targets stated as ratios to another scenario run beside this one (tas against baseline).

This machine is slower than the reference's CI and both schedulers are bound by the API server,
so a topology scenario is judged against our own baseline run back to back on the same machine:
its wall time and each class's time to admission over the baseline's (same size class). The
reference's own ratios on this machine (`peerHere`) are shown beside ours. Pure: the baseline
is a results JSON (cli.py finds and reads it).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

RESULT_NAME = re.compile(r"^(?P<scenario>.+)-(?P<stamp>\d{8}T\d{6}Z)\.json$")


def newest(out_dir: Path, scenario: str) -> Path | None:
    """The newest `<scenario>-<stamp>.json` in out_dir (what-if runs, with a suffix, are not)."""
    found = [
        (m.group("stamp"), p)
        for p in out_dir.glob(f"{scenario}-*.json")
        if (m := RESULT_NAME.match(p.name)) and m.group("scenario") == scenario
    ]
    return max(found)[1] if found else None


def read(path: Path) -> dict[str, Any]:
    res: dict[str, Any] = json.loads(path.read_text())
    if "wall_s" not in res or "tta_avg_s" not in res:
        raise ValueError(f"{path} is not a bench results JSON (no wall_s / tta_avg_s)")
    return res


def _ratio(ours: float | None, base: float | None) -> float | None:
    if ours is None or not base:
        return None
    return round(ours / base, 3)


def _row(ours: float | None, target: float | None, here: float | None) -> dict[str, Any]:
    met = None if ours is None or target is None else ours <= target
    return {"ours": ours, "target": target, "met": met, "reference_here": here}


def compare(
    res: dict[str, Any],
    base: dict[str, Any],
    base_file: str,
    sizes: dict[str, str],
    targets: dict[str, Any],
    here: dict[str, Any],
) -> dict[str, Any]:
    """The ratios of this run to `base` with their targets and verdicts.

    `sizes` maps each class to its size class (the baseline's class of the same size); `here`
    is the reference's tas and baseline figures on this machine, whose ratios stand beside ours.
    """
    wall_t = targets.get("wall_s")
    tta_t = targets.get("tta_s")
    here_tta = here.get("tta_avg_s") or {}
    here_base_tta = here.get("against_tta_avg_s") or {}
    base_tta = base.get("tta_avg_s") or {}
    by_size = {
        size: _row(
            _ratio((res.get("tta_avg_s") or {}).get(size), base_tta.get(size)),
            tta_t,
            _ratio(here_tta.get(size), here_base_tta.get(size)),
        )
        for size in dict.fromkeys(sizes.values())
    }
    by_class = {
        cls: {
            "size": size,
            **_row(
                _ratio((res.get("tta_by_class_avg_s") or {}).get(cls), base_tta.get(size)),
                tta_t,
                None,
            ),
        }
        for cls, size in sizes.items()
        if cls != size
    }
    return {
        "against": {
            "file": base_file,
            "scenario": base.get("scenario"),
            "started_at": base.get("started_at"),
            "all_finished": base.get("all_finished"),
            "wall_s": base.get("wall_s"),
            "tta_avg_s": base_tta,
            "tta_reference_avg_s": base.get("tta_reference_avg_s") or {},
        },
        "wall_s": _row(
            _ratio(res.get("wall_s"), base.get("wall_s")),
            wall_t,
            _ratio(here.get("wall_s"), here.get("against_wall_s")),
        ),
        "tta_by_size": by_size,
        "tta_by_class": by_class,
    }


def _cell(value: Any) -> str:
    return "" if value is None else str(value)


def _verdict(met: bool | None) -> str:
    return "" if met is None else ("met" if met else "MISSED")


def markdown(ratios: dict[str, Any]) -> list[str]:
    """The ratio table: ours, the target, the verdict, the reference's own ratio here."""
    base = ratios["against"]
    lines = [
        "",
        f"Against `{Path(base['file']).name}` ({base['scenario']}, started {base['started_at']}, "
        f"wall {base['wall_s']} s, all finished: {base['all_finished']}):",
        "",
        "| ratio to the baseline beside it | queuectl | target | verdict | reference here |",
        "| --- | ---: | ---: | --- | ---: |",
    ]

    def add(label: str, row: dict[str, Any]) -> None:
        lines.append(
            f"| {label} | {_cell(row['ours'])} | {_cell(row['target'])} | "
            f"{_verdict(row['met'])} | {_cell(row['reference_here'])} |"
        )

    add("wall time", ratios["wall_s"])
    for size, row in ratios["tta_by_size"].items():
        add(f"avg time to admission, {size}", row)
    for cls, row in ratios["tta_by_class"].items():
        add(f"avg time to admission, {cls} (over baseline {row['size']})", row)
    return lines + arrivals_markdown(ratios.get("arrivals") or {})


def arrivals_markdown(arrivals: dict[str, dict[str, float]]) -> list[str]:
    """What the arrivals alone explain (bench/cluster/ideal.py), size by size."""
    if not arrivals:
        return []
    lines = [
        "",
        "What the arrivals alone explain: each size's queue replayed on an ideal pooled "
        "scheduler (bench/cluster/ideal.py), its hold per admission fitted to the baseline "
        "beside it; the floor is this scenario with no hold at all (no scheduler waits less):",
        "",
        "| size | hold fitted on baseline | baseline, model | this scenario, model | ratio "
        "from arrivals alone | floor, this scenario |",
        "| --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for size, a in arrivals.items():
        lines.append(
            f"| {size} | {a['hold_extra_s']} s | {a['against_model_s']} s | {a['model_s']} s | "
            f"{a['ratio']} | {a['floor_s']} s |"
        )
    return lines
