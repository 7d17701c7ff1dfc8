"""Poll until a condition holds: the one waiting primitive for tests on a real cluster.

Tests assert behaviour, never speed; the timeout only bounds a hang, and the failure message
shows the last value seen so a failing test explains itself.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


class WaitTimeout(AssertionError):
    """The condition did not hold in time (an AssertionError, so pytest shows it as a failure)."""


def eventually(
    probe: Callable[[], T],
    until: Callable[[T], bool] = bool,
    *,
    timeout: float = 60.0,
    interval: float = 0.2,
    what: str = "condition",
) -> T:
    """Call `probe` until `until(value)` is true; return that value or raise WaitTimeout."""
    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if until(value):
            return value
        if time.monotonic() > deadline:
            raise WaitTimeout(f"{what} did not hold within {timeout:.0f}s; last value: {value!r}")
        time.sleep(interval)
