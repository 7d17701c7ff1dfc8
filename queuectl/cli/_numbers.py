"""Checked argparse types for every numeric flag: finite, in range, whole where it counts.

`float("nan")`, `float("inf")` and `-5` all parse, and a period of 0, -5 or NaN seconds makes a
loop spin; so no flag takes a bare `type=int` or `type=float` (a test walks every parser's
actions to keep it so). Each type carries its `Range`, so the same test can feed every flag the
values it must refuse. argparse names the flag in its error and exits 2:
`queuectl controller: error: argument --job-kind-recheck-seconds: -5: a number of seconds, ...`.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final, TypeVar

from queuectl.core import FAIR_PREEMPTION_DEFAULT, fair_preemption_rules

INT32_MAX: Final = 2**31 - 1
YEAR_SECONDS: Final = 365 * 86_400.0
"""The longest period or timeout a flag takes: longer is a typo (or an attempt to overflow a
timer), and a year already means "never" for a controller."""

N = TypeVar("N", int, float)


@dataclass(frozen=True)
class Range:
    """What a flag accepts; `says` is the words for it, after the value, in the error."""

    low: float
    high: float
    integer: bool
    above_low: bool
    says: str

    def admits(self, value: float) -> bool:
        if not math.isfinite(value) or value > self.high or value < self.low:
            return False
        return not (self.above_low and value == self.low)


def _checked(convert: Callable[[str], N], limits: Range) -> Callable[[str], N]:
    def parse(text: str) -> N:
        try:
            value = convert(text.strip())
        except (ValueError, OverflowError):
            raise argparse.ArgumentTypeError(f"{text}: {limits.says}") from None
        if not limits.admits(value):
            raise argparse.ArgumentTypeError(f"{text}: {limits.says}")
        return value

    parse.__name__ = "integer" if limits.integer else "number"
    parse.range = limits  # type: ignore[attr-defined]
    return parse


def whole(low: int, high: int = INT32_MAX, says: str | None = None) -> Callable[[str], int]:
    """An integer from `low` to `high` (a count, a port, a seed)."""
    words = says or f"a whole number from {low} to {high:,}"
    return _checked(int, Range(low, high, True, False, words))


def seconds(
    *, zero: str | None = None, minimum: float | None = None, high: float = YEAR_SECONDS
) -> Callable[[str], float]:
    """A duration in seconds, finite and at most `high`: with `zero` (what 0 means: "off",
    "preempt at once") from 0; with `minimum` (a period, where less would spin) from it;
    else more than 0."""
    if zero is not None:
        says = f"a number of seconds, 0 or more ({zero} at 0), at most {high:,.0f}"
        return _checked(float, Range(0.0, high, False, False, says))
    if minimum is not None:
        says = f"a number of seconds from {minimum:g} to {high:,.0f}"
        return _checked(float, Range(minimum, high, False, False, says))
    says = f"a number of seconds, more than 0, at most {high:,.0f}"
    return _checked(float, Range(0.0, high, False, True, says))


def real(low: float, high: float, *, above_low: bool = False, says: str) -> Callable[[str], float]:
    """Any other finite number in [low, high] (or (low, high] with `above_low`)."""
    return _checked(float, Range(low, high, False, above_low, says))


PORT: Final = whole(0, 65_535, "a port from 0 to 65535")
"""A TCP port; where 0 is not a free port, the flag's help says what it means instead."""


def range_of(parse: object) -> Range | None:
    """The `Range` a checked type carries (None for any other type)."""
    found = getattr(parse, "range", None)
    return found if isinstance(found, Range) else None


FAIR_RULES = ",".join(FAIR_PREEMPTION_DEFAULT)


def fair_rules(text: str) -> tuple[str, ...]:
    """--fair-sharing-preemption: the rules, comma-separated, checked as the core checks them."""
    rules = tuple(r.strip() for r in text.split(",") if r.strip())
    if not rules:
        raise argparse.ArgumentTypeError(f"name at least one rule, e.g. {FAIR_RULES}")
    try:
        return fair_preemption_rules(rules)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None
