"""`python -m bench chaos [--size full|ci] [--only NAME ...]`: the fault suite at full size.

Starts its own control plane (kube-apiserver is restarted in one scenario, so it must be ours),
four 8-GPU kwok nodes, the fault proxy and the controller, runs every scenario and prints one
row per scenario; `--json` also writes the rows with every violation and refusal spelled out.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import tempfile
from dataclasses import asdict
from pathlib import Path

from bench.chaos.suite import CI, FULL, STREAM_SCENARIOS, Suite, run_all, table
from queuectl.testenv import ControlPlane

NAMES = [*STREAM_SCENARIOS, "hostile-admission-reviews", "bypass-attempts"]


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m bench chaos", description=__doc__)
    p.add_argument("--size", choices=("full", "ci"), default="full")
    p.add_argument("--only", nargs="+", choices=NAMES, help="run just these scenarios")
    p.add_argument("--json", type=Path, help="write the rows here too")
    return p


def _progress(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def main(argv: list[str]) -> int:
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    args = parser().parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="queuectl-chaos-"))
    plane = ControlPlane(work / "plane", progress=_progress).start()
    suite: Suite | None = None
    try:
        plane.add_gpu_nodes(4, 8, name_prefix="chaos")
        suite = Suite(plane, work, FULL if args.size == "full" else CI).start()
        rows = run_all(suite, set(args.only) if args.only else None)
    finally:
        if suite is not None:
            suite.close()
        plane.stop()
    print(table(rows))
    for row in rows:
        for what in row.violations + [f"lost {j}" for j in row.jobs_lost]:
            print(f"  {row.scenario}: {what}")
    if args.json:
        args.json.write_text(json.dumps([asdict(r) for r in rows], indent=2))
    print(f"logs: {work}", file=sys.stderr)
    broken = any(r.violations or r.jobs_lost or r.double_admissions for r in rows)
    return 1 if broken else 0
