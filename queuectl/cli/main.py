"""The `queuectl` command: argparse with one subcommand per module of this package.

To add a subcommand, add a module `queuectl/cli/<name>.py` that defines

    def add_parser(subparsers: Subparsers) -> None:
        parser = subparsers.add_parser("<name>", help="...")
        parser.set_defaults(func=run)   # run(args: argparse.Namespace) -> int

Modules are discovered at start-up (sorted by name), so nobody has to edit this file, and a
module that fails to import is reported without breaking the other subcommands.
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

import queuectl.cli

if TYPE_CHECKING:
    Subparsers = argparse._SubParsersAction[argparse.ArgumentParser]
else:
    Subparsers = argparse._SubParsersAction

_NOT_COMMANDS = frozenset({"main"})


def command_modules() -> list[str]:
    """Names of the modules in queuectl.cli that may define a subcommand."""
    found = pkgutil.iter_modules(queuectl.cli.__path__)
    return sorted(
        m.name for m in found if not m.name.startswith("_") and m.name not in _NOT_COMMANDS
    )


def build_parser() -> tuple[argparse.ArgumentParser, dict[str, str]]:
    """The parser with every subcommand that loaded, and the errors of those that did not."""
    parser = argparse.ArgumentParser(
        prog="queuectl",
        description="Kubernetes-native queueing for GPU batch work.",
    )
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    broken: dict[str, str] = {}
    for name in command_modules():
        try:
            module = importlib.import_module(f"queuectl.cli.{name}")
        except Exception as exc:  # one broken module must not take down the others
            broken[name] = f"{type(exc).__name__}: {exc}"
            continue
        add = getattr(module, "add_parser", None)
        if callable(add):
            add(subparsers)
    return parser, broken


def main(argv: Sequence[str] | None = None) -> int:
    parser, broken = build_parser()
    args = parser.parse_args(argv)
    func = getattr(args, "func", None)
    if func is None:
        if args.command is None and not broken:
            parser.print_help()
            return 2
        for name, error in broken.items():
            print(f"queuectl: the '{name}' command failed to load: {error}", file=sys.stderr)
        parser.print_help(sys.stderr)
        return 2
    return int(func(args))


if __name__ == "__main__":
    sys.exit(main())
