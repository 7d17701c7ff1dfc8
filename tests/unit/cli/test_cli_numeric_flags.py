"""Every numeric flag of every command is checked: an operator who types `-5`, `0`, `nan` or
`1e400` for a period, a count or a port gets exit 2 naming the flag and what it takes, not a
controller whose recheck loop spins. The parsers are walked, so a flag added later with a bare
`type=int` or `type=float` fails here."""

from __future__ import annotations

import argparse
from collections.abc import Iterator

import pytest

from queuectl.cli._numbers import Range, range_of
from queuectl.cli.main import build_parser

NON_NUMBERS = ["nan", "NaN", "inf", "-inf", "Infinity", "1e400", "abc", "", "0x10"]


def _parsers(
    parser: argparse.ArgumentParser, path: tuple[str, ...] = ()
) -> Iterator[tuple[tuple[str, ...], argparse.ArgumentParser]]:
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _parsers(sub, (*path, name))


def flags() -> list[tuple[tuple[str, ...], argparse.Action]]:
    parser, broken = build_parser()
    assert not broken, broken
    return [(path, action) for path, p in _parsers(parser) for action in p._actions]


def numeric() -> list[tuple[tuple[str, ...], argparse.Action, Range]]:
    out = []
    for path, action in flags():
        found = range_of(action.type)
        if found is not None:
            out.append((path, action, found))
    return out


def name(path: tuple[str, ...], action: argparse.Action) -> str:
    return " ".join([*path, action.option_strings[-1] if action.option_strings else action.dest])


def test_no_flag_takes_a_bare_int_or_float() -> None:
    bare = [name(p, a) for p, a in flags() if a.type in (int, float)]
    assert not bare, f"use queuectl.cli._numbers (whole, seconds, real, PORT) for {bare}"


def test_a_flag_with_a_numeric_default_has_a_checked_type() -> None:
    unchecked = [
        name(p, a)
        for p, a in flags()
        if a.nargs != 0
        and isinstance(a.default, int | float)
        and not isinstance(a.default, bool)
        and range_of(a.type) is None
    ]
    assert not unchecked


def test_the_walk_finds_the_numeric_flags_of_every_command() -> None:
    found = {name(p, a) for p, a, _ in numeric()}
    for expected in (
        "controller --job-kind-recheck-seconds",
        "controller --preemption-patience-seconds",
        "controller --drain-max-share",
        "controller --webhook-port",
        "agent --poll-seconds",
        "agent --metrics-port",
        "dev up --gpus-per-node",
        "simulate --days",
        "simulate --node-failures",
    ):
        assert expected in found


def _refused(limits: Range) -> list[str]:
    def text(value: float) -> str:
        return str(int(value)) if limits.integer else repr(value)

    step = 1 if limits.integer else 0.5
    values = [*NON_NUMBERS, text(limits.low - step), text(limits.high + step)]
    values.append(text(limits.high * 10))
    if limits.above_low:
        values.append(text(limits.low))
    if limits.integer:
        values.append(f"{limits.low}.5")
    return values


CASES = [
    pytest.param(path, action, value, id=f"{name(path, action)}={value}")
    for path, action, limits in numeric()
    for value in _refused(limits)
]


@pytest.mark.parametrize(("path", "action", "value"), CASES)
def test_every_numeric_flag_refuses_what_it_cannot_mean(
    path: tuple[str, ...], action: argparse.Action, value: str
) -> None:
    assert action.type is not None
    with pytest.raises(argparse.ArgumentTypeError) as err:
        action.type(value)  # type: ignore[operator]
    assert str(err.value).startswith(f"{value}: "), "the error repeats what was given"


@pytest.mark.parametrize(
    ("path", "action", "limits"),
    [pytest.param(*case, id=name(case[0], case[1])) for case in numeric()],
)
def test_every_numeric_flag_takes_its_default_and_its_edges(
    path: tuple[str, ...], action: argparse.Action, limits: Range
) -> None:
    parse = action.type
    assert parse is not None
    if action.default is not None:
        assert parse(str(action.default)) == action.default  # type: ignore[operator]
    edges = [limits.high] + ([] if limits.above_low else [limits.low])
    for edge in edges:
        text = str(int(edge)) if limits.integer else repr(float(edge))
        assert parse(text) == edge  # type: ignore[operator]


@pytest.mark.parametrize(
    ("command", "flag", "value"),
    [
        ("controller", "--job-kind-recheck-seconds", "-5"),
        ("controller", "--job-kind-recheck-seconds", "0"),
        ("controller", "--job-kind-recheck-seconds", "nan"),
        ("controller", "--preemption-patience-seconds", "inf"),
        ("controller", "--drain-max-share", "0"),
        ("controller", "--webhook-port", "70000"),
        ("controller", "--health-port", "-1"),
        ("agent", "--poll-seconds", "0"),
        ("agent", "--poll-seconds", "nan"),
        ("agent", "--max-temperature", "inf"),
        ("agent", "--recovery-passes", "0"),
        ("agent", "--hold-down-seconds", "-1"),
        ("agent", "--time-slicing-replicas", "0"),
        ("agent", "--metrics-port", "1e400"),
    ],
)
def test_an_operator_gets_exit_2_naming_the_flag(
    capsys: pytest.CaptureFixture[str], command: str, flag: str, value: str
) -> None:
    parser, _ = build_parser()
    with pytest.raises(SystemExit) as exit:
        parser.parse_args([command, f"{flag}={value}"])
    assert exit.value.code == 2
    err = capsys.readouterr().err
    assert f"argument {flag}: {value}: " in err


@pytest.mark.parametrize(
    ("flag", "value", "says"),
    [
        ("--shared-nodes", "0x4", "a number of nodes from 1 to 10,000"),
        ("--shared-nodes", "99999999999x4", "a number of nodes from 1 to 10,000"),
        ("--shared-nodes", "2x0", "time-slicing replicas from 1 to 1,024"),
        ("--mig-nodes", "-2:all-1g.10gb", "a number of nodes from 1 to 10,000"),
        ("--mig-nodes", "nan:all-1g.10gb", "a number of nodes from 1 to 10,000"),
    ],
)
def test_the_counts_inside_composite_dev_flags_are_checked_too(
    capsys: pytest.CaptureFixture[str], flag: str, value: str, says: str
) -> None:
    parser, _ = build_parser()
    with pytest.raises(SystemExit) as exit:
        parser.parse_args(["dev", "up", f"{flag}={value}"])
    assert exit.value.code == 2
    err = capsys.readouterr().err
    assert f"argument {flag}: {flag} {value!r}" in err and says in err
