"""`queuectl import kueue -f DIR|FILE|- [-o OUT]`: Kueue manifests converted into queuectl's.

The conversion is `queuectl.kueue.convert` (pure); this module reads the files (a directory's
*.yaml, *.yml and *.json, not recursing, as `kubectl apply -f DIR` does), writes the YAML
(standard output, or the file given with -o, replaced whole and only when everything
converted) and the report of what did not carry over exactly (standard error, or --report).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Final

import yaml

from queuectl.cli._common import guarded
from queuectl.cli._kube import CliError
from queuectl.cli.main import Subparsers
from queuectl.kueue import ImportFailed, Report, Source, convert

SUFFIXES: Final = (".yaml", ".yml", ".json")
STDIN: Final = "-"


def add_parser(subparsers: Subparsers) -> None:
    parser = subparsers.add_parser(
        "import",
        help="convert another queueing system's objects into queuectl's",
        description="Convert another queueing system's objects into queuectl's.",
    )
    sources = parser.add_subparsers(dest="source", metavar="SOURCE", required=True)
    kueue = sources.add_parser(
        "kueue",
        help="convert Kueue manifests (kueue.x-k8s.io v1beta1, v1beta2)",
        description=(
            "Convert Kueue's ResourceFlavors, Topologies, Cohorts, ClusterQueues, LocalQueues, "
            "WorkloadPriorityClasses and AdmissionChecks into queuectl's, as YAML that "
            "`kubectl apply -f` takes. A report names every field that did not carry over "
            "exactly, and why; other objects are skipped and named in it."
        ),
    )
    kueue.add_argument(
        "-f",
        "--filename",
        action="append",
        required=True,
        metavar="PATH",
        help="a manifest file, a directory of *.yaml, *.yml and *.json files, or - for "
        "standard input; may be repeated",
    )
    kueue.add_argument(
        "-o",
        "--output",
        metavar="FILE",
        help="write the queuectl YAML to FILE (default: standard output); nothing is "
        "written when the import fails",
    )
    kueue.add_argument(
        "--report",
        metavar="FILE",
        help="write the report to FILE (default: standard error)",
    )
    kueue.add_argument(
        "--report-format",
        choices=("text", "json"),
        default="text",
        help="text (default) or json",
    )
    kueue.set_defaults(func=run)


@guarded
def run(args: argparse.Namespace) -> int:
    sources = [src for path in args.filename for src in read_sources(path)]
    try:
        result = convert(sources)
    except ImportFailed as failed:
        listed = "\n".join(f"  {p}" for p in failed.problems)
        raise CliError(
            f"the Kueue manifests cannot be converted; nothing written:\n{listed}"
        ) from None
    text = render(result.objects, args.filename)
    if args.output:
        write_whole(Path(args.output), text)
    else:
        sys.stdout.write(text)
    report = format_report(result.report, args.report_format)
    if args.report:
        write_whole(Path(args.report), report)
    else:
        sys.stderr.write(report)
    return 0


def read_sources(path: str) -> Iterator[Source]:
    """Every YAML document of a file, a directory's files, or standard input."""
    if path == STDIN:
        yield from parse(STDIN, sys.stdin.read())
        return
    p = Path(path)
    if p.is_dir():
        files = sorted(f for f in p.iterdir() if f.is_file() and f.suffix in SUFFIXES)
        if not files:
            raise CliError(f"{path}: no {', '.join('*' + s for s in SUFFIXES)} files in it")
    elif p.exists():
        files = [p]
    else:
        raise CliError(f"{path}: no such file or directory")
    for f in files:
        try:
            text = f.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as err:
            raise CliError(f"{f}: cannot be read as text ({err})") from err
        yield from parse(str(f), text)


def parse(origin: str, text: str) -> list[Source]:
    """The documents of one YAML stream; a syntax error names the line to fix."""
    try:
        return [Source(origin, i, doc) for i, doc in enumerate(yaml.safe_load_all(text), 1)]
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(err, "problem", None) or str(err)
        raise CliError(
            f"{origin}: not valid YAML{where} ({problem}); fix the file or give Kueue "
            "manifests as `kubectl get ... -o yaml` writes them"
        ) from err


def render(objects: list[dict[str, Any]], inputs: list[str]) -> str:
    """Multi-document YAML, with a header saying where it came from."""
    header = (
        f"# Converted by `queuectl import kueue` from {', '.join(inputs)}.\n"
        "# The report of the import lists what did not carry over exactly.\n"
    )
    body = yaml.safe_dump_all(objects, sort_keys=False, explicit_start=True)
    return header + body


def format_report(report: Report, fmt: str) -> str:
    if fmt == "json":
        return json.dumps(report.as_json(), indent=2) + "\n"
    return report.text()


def write_whole(path: Path, text: str) -> None:
    """Replace `path` in one step (a temporary file renamed over it): readers never see a
    half-written file, and a failure leaves what was there."""
    directory = path.parent if str(path.parent) else Path(".")
    try:
        fd, tmp = tempfile.mkstemp(dir=directory, prefix=f".{path.name}.", suffix=".tmp")
    except OSError as err:
        raise CliError(f"{path}: cannot write there ({err.strerror})") from err
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(text)
        os.replace(tmp, path)
    except OSError as err:
        Path(tmp).unlink(missing_ok=True)
        raise CliError(f"{path}: cannot write it ({err.strerror})") from err
