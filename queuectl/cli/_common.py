"""What every cluster-facing command shares: connection flags, kind aliases, error handling."""

from __future__ import annotations

import argparse
import functools
import sys
from collections.abc import Callable, Mapping
from typing import Final

from queuectl.cli._kube import CliError, Kube, default_namespace

# canonical kind -> every name a user may type for it (kubectl style: singular, plural, short)
ALIASES: Final[Mapping[str, tuple[str, ...]]] = {
    "clusterqueue": ("clusterqueue", "clusterqueues", "cq"),
    "localqueue": ("localqueue", "localqueues", "lq"),
    "cohort": ("cohort", "cohorts", "co"),
    "workload": ("workload", "workloads", "wl"),
    "job": ("job", "jobs"),
    "flavor": ("flavor", "flavors", "resourceflavor", "resourceflavors", "rf"),
}


def kind_type(
    allowed: tuple[str, ...], extra: Mapping[str, tuple[str, ...]] | None = None
) -> Callable[[str], str]:
    """An argparse `type` that maps any alias of an allowed kind to its canonical name
    (`extra` adds kinds and their aliases, as the job kinds' from their registry)."""
    known = {**ALIASES, **(extra or {})}
    lookup = {a: k for k in allowed for a in known[k]}

    def parse(value: str) -> str:
        found = lookup.get(value.lower())
        if found is None:
            choices = ", ".join(f"{k} ({'/'.join(known[k][1:])})" for k in allowed)
            raise argparse.ArgumentTypeError(f"unknown kind {value!r}; one of: {choices}")
        return found

    parse.__name__ = "kind"
    return parse


def add_connection_args(p: argparse.ArgumentParser, *, namespaced: bool = True) -> None:
    p.add_argument("--kubeconfig", help="kubeconfig file (default: $KUBECONFIG, ~/.kube/config)")
    p.add_argument("--context", help="kubeconfig context to use (default: the current one)")
    if namespaced:
        p.add_argument(
            "-n",
            "--namespace",
            help="namespace of LocalQueues and Workloads (default: the context's namespace)",
        )


def connect(args: argparse.Namespace) -> Kube:
    return Kube.connect(args.kubeconfig, args.context)


def namespace(args: argparse.Namespace) -> str:
    ns = getattr(args, "namespace", None)
    return str(ns) if ns else default_namespace(args.kubeconfig, args.context)


Run = Callable[[argparse.Namespace], int]


def guarded(run: Run) -> Run:
    """Expected failures print one line and exit non-zero; no traceback reaches the user."""

    @functools.wraps(run)
    def wrapper(args: argparse.Namespace) -> int:
        try:
            return run(args)
        except CliError as err:
            print(f"queuectl: error: {err}", file=sys.stderr)
            return err.code
        except KeyboardInterrupt:
            return 130
        except BrokenPipeError:  # `| head` closed the pipe: not an error
            sys.stderr.close()
            return 0

    return wrapper
