"""`python -m bench bypass`: the bypass fuzzer on a local control plane of its own.

Starts the control plane, the fuzzer's kwok H100 and A100 nodes, the real operators (JobSet,
LWS, KubeRay, training-operator, mpi-operator, Trainer) and the controller, then for each job
kind admits a workload that fills an 8-GPU ClusterQueue, queues a second, and tries every
generated mutation of the kind, its children and its pods as a plain user
(bench/bypass/mutations.py), while the invariant sampler holds every GPU pod to what was
admitted. Writes bench/results/bypass-<stamp>.md and .json; exit status 1 when any attempt is
a violation.
"""

from __future__ import annotations

import argparse
import signal
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

from bench.bypass.fuzz import CI, FULL, KindReport, fuzz_kind
from bench.bypass.kinds import CASES
from bench.bypass.report import table, write
from bench.bypass.world import Pool, client_of
from bench.chaos.world import Replica
from queuectl.testenv import ControlPlane, operatorrun
from queuectl.testenv.invariants import Sampler

RESULTS_DIR = Path(__file__).resolve().parents[1] / "results"


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m bench bypass", description=__doc__)
    p.add_argument("--size", choices=("full", "ci"), default="full")
    p.add_argument("--kinds", nargs="+", choices=list(CASES), help="just these kinds")
    p.add_argument("--sample", type=int, help="mutations per kind (default: all, or 5 at ci)")
    p.add_argument("--budget-s", type=float, help="seconds per kind (default 600, 30 at ci)")
    p.add_argument("--seed", type=int, default=23)
    p.add_argument("--out", type=Path, default=RESULTS_DIR, help="where the report goes")
    return p


def _progress(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def main(argv: list[str]) -> int:
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    args = parser().parse_args(argv)
    size = FULL if args.size == "full" else CI
    if args.sample is not None:
        if args.sample < 1:
            print("--sample must be at least 1", file=sys.stderr)
            return 2
        size = replace(size, sample=args.sample)
    if args.budget_s is not None:
        if not args.budget_s > 0:
            print("--budget-s must be a positive number of seconds", file=sys.stderr)
            return 2
        size = replace(size, budget_s=args.budget_s)
    size = replace(size, seed=args.seed)
    cases = [CASES[k] for k in (args.kinds or list(CASES))]
    work = Path(tempfile.mkdtemp(prefix="queuectl-bypass-"))
    plane = ControlPlane(work / "plane", progress=_progress).start()
    reports: list[KindReport] = []
    replica: Replica | None = None
    started = time.time()
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(started))
    header: dict[str, object] = {
        "size": args.size,
        "sample": size.sample if size.sample is not None else "all",
        "budget_s_per_kind": size.budget_s,
        "seed": size.seed,
    }
    try:
        wanted = sorted({op for c in cases for op in c.operators})
        operatorrun.start_all(plane, wanted, _progress)
        with plane.api_client() as api:
            rest, user = client_of(api)
            replica = Replica("controller", plane.kubeconfig, work)  # it installs our CRDs
            replica.start(wait_leading=True)
            pool = Pool(rest).setup(plane.add_gpu_nodes)
            if "trainer" in wanted:
                pool.add_runtimes()
            sampler = Sampler(api, [], interval=0.5, gpus_by_namespace=True).start()
            try:
                for case in cases:
                    reports.append(fuzz_kind(rest, user, pool, case, sampler, size, _progress))
                    _progress(table(reports))
                    write(args.out, stamp, reports, {**header, "partial": True})
            finally:
                sampler.stop()
    finally:
        if replica is not None:
            replica.stop()
        plane.stop()
    md = write(args.out, stamp, reports, {**header, "wall_s": round(time.time() - started)})
    print(table(reports))
    print(f"report: {md}; logs: {work}", file=sys.stderr)
    return 1 if any(r.violations for r in reports) else 0
