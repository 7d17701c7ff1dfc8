"""Formatting: quantities, durations, tables that fit, colour only when wanted, explanations."""

from __future__ import annotations

import io

import pytest

from queuectl.cli._explain import explain_lines, one_line
from queuectl.cli._render import Term, duration, quantity, table
from queuectl.core import Admission, Explanation, PendingInfo, QueueHolding


@pytest.mark.parametrize(
    ("resource", "value", "text"),
    [
        ("cpu", 32000, "32"),
        ("cpu", 500, "500m"),
        ("memory", 256 * 2**30, "256Gi"),
        ("memory", 2 * 2**40, "2Ti"),
        ("memory", 1536 * 2**20, "1536Mi"),  # exact beats short
        ("memory", 1536 * 2**20 + 1, "1.5Gi"),
        ("memory", 100, "100"),
        ("nvidia.com/gpu", 8, "8"),
        ("nvidia.com/gpu", None, "-"),
    ],
)
def test_quantities_read_as_written(resource: str, value: int | None, text: str) -> None:
    assert quantity(resource, value) == text


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(None, "-"), (0, "0s"), (45, "45s"), (192, "3m12s"), (7500, "2h5m"), (3600, "1h"),
     (273600, "3d4h"), (-5, "0s")],
)  # fmt: skip
def test_durations_like_kubectl(seconds: float | None, text: str) -> None:
    assert duration(seconds) == text


def test_table_fits_the_terminal_by_cutting_the_widest_column() -> None:
    rows = [["a" * 60, "short", "x"], ["b", "also", "y"]]
    text = table(["NAME", "MORE", "Z"], rows, Term(width=40))
    assert all(len(line) <= 40 for line in text.splitlines())
    assert "…" in text.splitlines()[1]
    assert table(["NAME"], [["a" * 60]], Term(width=0)).endswith("a" * 60)  # piped: whole


def test_colour_only_when_asked() -> None:
    styled = [[("Admitted", "green")]]
    assert "\x1b[" not in table(["S"], styled, Term(color=False))
    coloured = table(["S"], styled, Term(color=True))
    assert "\x1b[32mAdmitted\x1b[0m" in coloured


@pytest.mark.parametrize(
    ("tty", "env", "color", "width"),
    [
        (False, {}, False, 0),
        (True, {"TERM": "xterm"}, True, None),
        (True, {"NO_COLOR": "1", "TERM": "xterm"}, False, None),
        (True, {"TERM": "dumb"}, False, None),
        (False, {"COLUMNS": "77"}, False, 77),
    ],
)
def test_terminal_detection(
    monkeypatch: pytest.MonkeyPatch, tty: bool, env: dict[str, str], color: bool, width: int | None
) -> None:
    for var in ("NO_COLOR", "TERM", "COLUMNS"):
        monkeypatch.delenv(var, raising=False)
    for k, v in env.items():
        monkeypatch.setenv(k, v)

    class Stream(io.StringIO):
        def isatty(self) -> bool:
            return tty

    term = Term.detect(Stream())
    assert term.color is color
    if width is not None:
        assert term.width == width
    else:
        assert term.width > 0


QUOTA = PendingInfo(
    "ns/w",
    "WaitingForQuota",
    "insufficient nvidia.com/gpu in flavor h100",
    resource="nvidia.com/gpu",
    flavor="h100",
    requested=32,
    available=8,
    shortfall=24,
    holders=(QueueHolding("team-a", 16, 8), QueueHolding("team-b", 8, 0)),
)


@pytest.mark.parametrize(
    ("expl", "withheld", "expected", "short"),
    [
        (
            Explanation("ns/w", "pending", pending=QUOTA),
            None,
            [
                "Reason:      WaitingForQuota",
                "Detail:      insufficient nvidia.com/gpu in flavor h100",
                "Missing:     needs 32 nvidia.com/gpu of flavor h100, 8 available: 24 short",
                "Held by:     team-a uses 16 (8 borrowed); team-b uses 8",
                "Preemption:  cannot help: the preemption policies allow no victims that would "
                "free enough",
            ],
            "WaitingForQuota: 24 nvidia.com/gpu short in h100",
        ),
        (
            Explanation(
                "ns/w",
                "pending",
                pending=PendingInfo("ns/w", "Pending", "fits by preempting 2 workload(s): a, b"),
                preemption_possible=True,
                would_evict=("x/a", "x/b"),
            ),
            None,
            [
                "Reason:      Pending",
                "Detail:      fits by preempting 2 workload(s): a, b",
                "Preemption:  would admit it by evicting x/a, x/b",
            ],
            "fits by preempting 2",
        ),
        (
            Explanation("ns/w", "nominated", preemption_possible=True, would_evict=("x/a",)),
            None,
            [
                "Reason:      Pending",
                "Preemption:  under way; waiting for these to release quota: x/a",
            ],
            "WaitingForPreemptedWorkloads",
        ),
        (
            Explanation("ns/w", "inactive"),
            None,
            [
                "Reason:      Inactive",
                "Detail:      spec.active is false; `queuectl resume workload` queues it again",
            ],
            "Inactive",
        ),
        (
            None,
            ("LocalQueueNotFound", "LocalQueue 'q' does not exist"),
            ["Reason:      LocalQueueNotFound", "Detail:      LocalQueue 'q' does not exist"],
            "LocalQueueNotFound",
        ),
        (
            Explanation("ns/w", "admitted", admission=Admission("cq", ())),
            None,
            ["Reason:      Admitted to ClusterQueue cq"],
            "Admitted",
        ),
        (
            Explanation(
                "ns/w",
                "pending",
                pending=PendingInfo("ns/w", "Pending", "fits now"),
                admission=Admission("cq", ()),
            ),
            None,
            [
                "Reason:      Pending",
                "Detail:      fits now",
                "Preemption:  not needed: it fits now",
            ],
            "FitsNow",
        ),
    ],
)
def test_explanations_in_words(
    expl: Explanation | None,
    withheld: tuple[str, str] | None,
    expected: list[str],
    short: str,
) -> None:
    assert explain_lines(expl, withheld) == expected
    assert one_line(expl, withheld) == short
