"""Two runs side by side: the figures of their summaries, flattened, and which differ."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

SKIP = frozenset({"never_admitted"})


def flatten(d: Any, prefix: str = "") -> dict[str, Any]:
    """`{"a": {"b": 1}}` -> `{"a.b": 1}` (lists and scalars are leaves)."""
    if not isinstance(d, Mapping):
        return {prefix: d}
    out: dict[str, Any] = {}
    for k, v in d.items():
        if not prefix and k in SKIP:
            continue
        out.update(flatten(v, f"{prefix}.{k}" if prefix else str(k)))
    return out


def rows(summaries: list[Mapping[str, Any]]) -> list[tuple[str, list[Any], bool]]:
    """(figure, value per run, differs) for every figure of any run, in name order."""
    flat = [flatten(s) for s in summaries]
    keys = sorted({k for f in flat for k in f})
    out = []
    for k in keys:
        values = [f.get(k, "") for f in flat]
        out.append((k, values, len({json.dumps(v) for v in values}) > 1))
    return out


def differences(a: Mapping[str, Any], b: Mapping[str, Any]) -> dict[str, list[Any]]:
    """figure -> [A, B] for the figures that differ (what the JSON of `--compare` reports)."""
    return {k: v for k, v, differs in rows([a, b]) if differs and not k.startswith("sim.")}
