"""`queuectl simulate`: what-if for quota changes, with the real scheduling core.

Reads the manifests you would apply (-f, files or directories), a node inventory (--nodes) and
a trace (--trace, or --generate for a synthetic one), replays it on a virtual clock through
`queuectl.sim`, and prints a table and then, last, one JSON summary. `--compare A B` runs the
same trace and nodes under two configurations and highlights what differs; `--html` writes a
self-contained report with plots. A progress bar goes to stderr.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path
from typing import Any

import yaml

from queuectl.cli._numbers import FAIR_RULES, fair_rules, real, seconds, whole
from queuectl.cli.main import Subparsers
from queuectl.core import DEFAULT_PATIENCE_SECONDS
from queuectl.sim import (
    GenerateOptions,
    SimConfig,
    SimInputError,
    SimOptions,
    generate_trace,
    load_config,
    parse_nodes,
    parse_trace,
    simulate,
)
from queuectl.sim.compare import differences, rows
from queuectl.sim.engine import SimResult
from queuectl.sim.nodes import nodes_from_manifests
from queuectl.sim.report import render
from queuectl.sim.trace import MAX_SECONDS, dump_trace

MAX_JOBS = 10_000_000
MAX_DAYS = MAX_SECONDS / 86_400
"""The longest span a trace may have (`queuectl.sim.trace.MAX_SECONDS`)."""
MAX_HOURS = MAX_DAYS * 24


def add_parser(subparsers: Subparsers) -> None:
    p = subparsers.add_parser(
        "simulate",
        help="replay a trace of jobs against quota manifests, offline, with the real core",
        description="What-if: replay a trace (or a generated one) through the real scheduling "
        "core on a virtual clock, and report waits, allocation, preemptions and fairness.",
    )
    p.add_argument(
        "-f",
        "--filename",
        action="append",
        default=[],
        metavar="PATH",
        help="manifests (ResourceFlavor, Topology, Cohort, ClusterQueue, LocalQueue, "
        "WorkloadPriorityClass): a YAML file or a directory of them; repeatable",
    )
    p.add_argument(
        "--compare",
        nargs=2,
        metavar=("A", "B"),
        help="two configurations (files or directories, each instead of -f) to run side by side",
    )
    p.add_argument(
        "--nodes",
        required=True,
        help="COUNTxGPUS:FLAVOR[,...] (e.g. 64x8:H100,32x8:A100) or a YAML file of Node objects",
    )
    p.add_argument(
        "--preemption-patience",
        type=seconds(zero="preempt at once"),
        default=DEFAULT_PATIENCE_SECONDS,
        metavar="SECONDS",
        help="as the controller's --preemption-patience-seconds: how long a would-be preemptor "
        f"waits for completions instead (default: {DEFAULT_PATIENCE_SECONDS:g}; 0 = never)",
    )
    p.add_argument(
        "--fair-sharing-preemption",
        type=fair_rules,
        default=(),
        metavar="RULES",
        help="turn on fair-sharing preemption with these rules, comma-separated, in order: "
        f"{FAIR_RULES} (Kueue's default), or either one alone; off when not given",
    )
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--trace", metavar="FILE", help="jobs as CSV (with a header) or JSON lines")
    src.add_argument("--generate", action="store_true", help="generate a synthetic trace")
    p.add_argument(
        "--jobs", type=whole(1, MAX_JOBS), default=1000, help="--generate: how many jobs"
    )
    p.add_argument(
        "--days",
        type=real(0.0, MAX_DAYS, above_low=True, says=f"days, more than 0, at most {MAX_DAYS:g}"),
        default=1.0,
        help="--generate: span of the arrivals",
    )
    p.add_argument(
        "--seed",
        type=whole(0, 2**63 - 1),
        default=1,
        help="--generate and node failures: the seed",
    )
    p.add_argument(
        "--load",
        type=real(0.0, 100.0, above_low=True, says="a ratio, more than 0, at most 100"),
        default=0.8,
        help="--generate: offered GPU-hours over the fleet's GPU-hours",
    )
    p.add_argument(
        "--habits",
        default="",
        metavar="QUEUE=HABIT,...",
        help="--generate: a LocalQueue's habit (small-and-many, big-gangs, bursty, "
        "always-borrows, light); the others take the first three in turn",
    )
    p.add_argument("--save-trace", metavar="FILE", help="write the trace used as JSON lines")
    p.add_argument(
        "--node-failures",
        type=real(0.0, 1_000.0, says="failures per node per day, 0 (none) to 1000"),
        default=0.0,
        metavar="RATE",
        help="node failures per node per day (a failure evicts what runs there; 0: none)",
    )
    p.add_argument(
        "--repair-hours",
        type=real(
            0.0,
            MAX_DAYS * 24,
            above_low=True,
            says=f"hours, more than 0, at most {MAX_DAYS * 24:g}",
        ),
        default=4.0,
        help="how long a failed node is out",
    )
    p.add_argument(
        "--eta-error",
        action="store_true",
        help="judge the ETA `describe` shows: at sampled submissions, the estimate against "
        "the actual start (p50/p90 of the error per priority class; a replay per sample)",
    )
    p.add_argument(
        "--eta-every",
        type=whole(1, MAX_JOBS),
        default=10,
        metavar="N",
        help="--eta-error: sample every Nth submission (default: 10)",
    )
    p.add_argument("--html", metavar="FILE", help="write a self-contained HTML report")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress bar and no table")
    p.set_defaults(func=run)


def _yaml_docs(paths: list[str]) -> list[tuple[str, Any]]:
    files: list[Path] = []
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            files += sorted([*path.glob("*.yaml"), *path.glob("*.yml")])
        elif path.is_file():
            files.append(path)
        else:
            raise SimInputError(f"{raw}: no such file or directory")
    docs: list[tuple[str, Any]] = []
    for f in files:
        try:
            loaded = list(yaml.safe_load_all(f.read_text()))
        except yaml.YAMLError as err:
            raise SimInputError(f"{f}: not valid YAML: {err}") from None
        docs += [(f"{f} (document {i + 1})", d) for i, d in enumerate(loaded)]
    return docs


def _habits(text: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        queue, eq, habit = part.partition("=")
        if not eq or not queue or not habit:
            raise SimInputError(f"--habits: {part!r} is not QUEUE=HABIT (e.g. team-a=bursty)")
        out[queue] = habit
    return out


class Progress:
    """A bar on stderr: redrawn in place on a terminal, a line per 10 % otherwise."""

    def __init__(self, label: str, enabled: bool) -> None:
        self.label, self.enabled, self.last = label, enabled, -1
        self.tty = sys.stderr.isatty()

    def __call__(self, fraction: float) -> None:
        if not self.enabled:
            return
        pct = int(fraction * 100)
        step = 1 if self.tty else 10
        if pct // step == self.last // step and pct != 100:
            return
        if pct == self.last:
            return
        self.last = pct
        bar = "#" * (pct // 4) + "-" * (25 - pct // 4)
        end = "\n" if pct >= 100 or not self.tty else ""
        sys.stderr.write(f"\r{self.label} [{bar}] {pct:3d}% of jobs done{end}")
        sys.stderr.flush()


def _table(labels: list[str], results: list[SimResult], color: bool) -> str:
    picked = (
        "jobs.",
        "wait_seconds.overall.",
        "jct_seconds.overall.p50",
        "jct_seconds.overall.p95",
        "gpu_allocation_pct.mean",
        "fragmentation_pct.mean",
        "preemptions.total",
        "preemptions.gpu_hours_lost",
        "node_failures.",
        "fairness.jain_index",
        "borrowing.",
        "wait_seconds.teams.",
        "eta_error.overall.",
        "eta_error.classes.",
        "eta_error.sampled_every",
    )
    lines = [f"{'figure':<44}" + "".join(f"{lab:>18}" for lab in labels)]
    for key, values, differs in rows([r.summary for r in results]):
        if not key.startswith(picked) or (key.endswith((".count", ".mean")) and "wait" in key):
            continue
        line = f"{key:<44}" + "".join(f"{v!s:>18}" for v in values)
        if differs and len(results) > 1:
            line = f"\033[1;33m{line}\033[0m" if color else f"{line}  *"
        lines.append(line)
    return "\n".join(lines)


def _simulate(args: argparse.Namespace) -> int:
    configs: list[tuple[str, SimConfig]] = []
    if args.compare:
        if args.filename:
            raise SimInputError("pass either -f or --compare A B, not both")
        for path in args.compare:
            configs.append((Path(path).name or path, load_config(_yaml_docs([path]))))
    else:
        if not args.filename:
            raise SimInputError("no manifests: pass -f FILE_OR_DIR (e.g. -f config/samples)")
        configs.append(("run", load_config(_yaml_docs(args.filename))))
    base = configs[0][1]
    nodes_path = Path(args.nodes)
    if nodes_path.is_file():
        nodes = nodes_from_manifests(_yaml_docs([args.nodes]))
    else:
        nodes = parse_nodes(args.nodes, base)
    if args.generate:
        gen = GenerateOptions(args.jobs, args.days, args.seed, args.load, _habits(args.habits))
        jobs = generate_trace(base, nodes, gen)
    else:
        path = Path(args.trace)
        if not path.is_file():
            raise SimInputError(f"--trace {args.trace}: no such file")
        jobs = parse_trace(path.read_text(), str(path))
    if args.save_trace:
        Path(args.save_trace).write_text(dump_trace(jobs))
    options = SimOptions(
        node_failures=args.node_failures,
        repair_seconds=args.repair_hours * 3600,
        seed=args.seed,
        preemption_patience=args.preemption_patience,
        fair_preemption=args.fair_sharing_preemption,
        eta_every=args.eta_every if args.eta_error else 0,
    )
    results = []
    for label, config in configs:
        progress = Progress(f"simulating {label}", not args.quiet)
        results.append(simulate(config, nodes, jobs, options, progress))
    labels = [label for label, _ in configs]
    if args.html:
        Path(args.html).write_text(render(list(zip(labels, results, strict=True))))
    if not args.quiet:
        print(_table(labels, results, sys.stdout.isatty()))
    if len(results) == 1:
        out: dict[str, Any] = results[0].summary
    else:
        out = {
            "runs": dict(zip(labels, (r.summary for r in results), strict=True)),
            "differences": differences(results[0].summary, results[1].summary),
        }
    print(json.dumps(finite(out), sort_keys=True, allow_nan=False))
    return 0


def finite(value: Any) -> Any:
    """The summary with every non-finite float as null: JSON has no NaN or Infinity, and a
    reader's parser (jq, Go, JavaScript) refuses them. Checked input leaves none; this keeps
    the last line JSON whatever a figure divides by."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [finite(v) for v in value]
    return value


def run(args: argparse.Namespace) -> int:
    try:
        return _simulate(args)
    except SimInputError as err:
        print(f"queuectl simulate: {err}", file=sys.stderr)
        return 2
