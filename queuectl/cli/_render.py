"""Terminal output: tables that fit the width, colour only for a terminal, human quantities.

Colour is used when the stream is a terminal and neither NO_COLOR (https://no-color.org) nor
TERM=dumb says otherwise; width is the terminal's, or unlimited when piped (so `| grep` and
`| awk` see whole lines). COLUMNS overrides the width either way.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final, TextIO

from queuectl.api.quantity import unit_of

_CODES: Final = {
    "bold": "1",
    "dim": "2",
    "red": "31",
    "green": "32",
    "yellow": "33",
    "blue": "34",
    "cyan": "36",
}
ELLIPSIS: Final = "…"
MIN_COLUMN: Final = 6


@dataclass(frozen=True)
class Term:
    color: bool = False
    width: int = 0
    """0: unlimited."""

    @classmethod
    def detect(cls, stream: TextIO) -> Term:
        tty = bool(getattr(stream, "isatty", lambda: False)())
        color = tty and "NO_COLOR" not in os.environ and os.environ.get("TERM", "") != "dumb"
        width = 0
        columns = os.environ.get("COLUMNS", "")
        if columns.isdigit():
            width = int(columns)
        elif tty:
            width = shutil.get_terminal_size((100, 24)).columns
        return cls(color=color, width=width)

    def paint(self, text: str, *styles: str) -> str:
        codes = ";".join(_CODES[s] for s in styles if s in _CODES)
        if not self.color or not codes or not text:
            return text
        return f"\x1b[{codes}m{text}\x1b[0m"


Cell = str | tuple[str, str]
"""Plain text, or (text, style)."""


def _text(cell: Cell) -> str:
    return cell if isinstance(cell, str) else cell[0]


def _fit(text: str, width: int) -> str:
    if len(text) <= width:
        return text
    return text[: max(0, width - 1)] + ELLIPSIS if width > 0 else ""


def table(headers: Sequence[str], rows: Sequence[Sequence[Cell]], term: Term) -> str:
    """Left-aligned columns two spaces apart, kubectl style. When the terminal is too narrow
    the widest columns are shortened (never below MIN_COLUMN) and cut with an ellipsis."""
    widths = [len(h) for h in headers]
    for row in rows:
        for i, cell in enumerate(row):
            widths[i] = max(widths[i], len(_text(cell)))
    if term.width:
        budget = term.width - 2 * (len(widths) - 1)
        while sum(widths) > budget:
            i = max(range(len(widths)), key=lambda j: widths[j])
            if widths[i] <= MIN_COLUMN:
                break
            widths[i] -= 1
    lines = []
    head = "  ".join(_fit(h, widths[i]).ljust(widths[i]) for i, h in enumerate(headers))
    lines.append(term.paint(head.rstrip(), "bold"))
    for row in rows:
        parts = []
        for i, cell in enumerate(row):
            text = _fit(_text(cell), widths[i])
            pad = " " * (widths[i] - len(text))
            style = cell[1] if isinstance(cell, tuple) else ""
            parts.append(term.paint(text, style) + pad)
        lines.append("  ".join(parts).rstrip())
    return "\n".join(lines)


# --- quantities and times -------------------------------------------------------------------
_BINARY: Final = (
    ("Ei", 2**60),
    ("Pi", 2**50),
    ("Ti", 2**40),
    ("Gi", 2**30),
    ("Mi", 2**20),
    ("Ki", 2**10),
)


def quantity(resource: str, value: int | None) -> str:
    """A canonical integer as a user writes it: cpu '32' or '500m', memory '256Gi', GPUs '8'."""
    if value is None:
        return "-"
    unit = unit_of(resource)
    if unit == "millicores":
        return str(value // 1000) if value % 1000 == 0 else f"{value}m"
    if unit == "bytes":
        for suffix, size in _BINARY:
            if value >= size and value % size == 0:
                return f"{value // size}{suffix}"
        for suffix, size in _BINARY:
            if value >= size:
                return f"{value / size:.1f}{suffix}"
        return str(value)
    return str(value)


def duration(seconds: float | None) -> str:
    """Like kubectl's ages: 45s, 3m12s, 2h5m, 3d4h."""
    if seconds is None:
        return "-"
    s = max(0, int(seconds))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60}s" if s % 60 else f"{s // 60}m"
    if s < 86400:
        return f"{s // 3600}h{(s % 3600) // 60}m" if (s % 3600) // 60 else f"{s // 3600}h"
    return f"{s // 86400}d{(s % 86400) // 3600}h" if (s % 86400) // 3600 else f"{s // 86400}d"
