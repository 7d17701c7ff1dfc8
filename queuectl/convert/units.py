"""Quantities and times as the API writes them <-> the core's integers and epoch seconds.

Quantities go through `queuectl.api.quantity.canonical`, the same parser the API models use, so
both sides agree on every unit.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from functools import lru_cache
from typing import Any

from queuectl.api import quantity

Obj = Mapping[str, Any]


@lru_cache(maxsize=4096)
def _canonical(resource: str, value: str | int) -> int:
    return quantity.canonical(resource, value)


def canonical(resource: str, value: Any) -> int:
    """A quantity in canonical units; memoised since the same spellings repeat everywhere."""
    return _canonical(resource, value if isinstance(value, int | str) else str(value))


def parse_time(value: str | None) -> float | None:
    """RFC3339 -> epoch seconds."""
    if not value:
        return None
    return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()


def format_time(epoch: float) -> str:
    """Epoch seconds -> RFC3339 (UTC, second precision, as metav1.Time writes it)."""
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def quantity_string(resource: str, value: int) -> str | int:
    """Canonical int back to a quantity the API server accepts (cpu millicores -> 'NNNm')."""
    return f"{value}m" if quantity.unit_of(resource) == "millicores" else value
