"""Webhook answers while a large first cycle runs: the cycle on the event loop vs on its thread.

One process holds what the controller holds: the real webhook server (HTTPS, the Job mutating
webhook) on an asyncio loop, a 10 ms timer standing in for Lease renewal and watch handling,
a `Scheduler` with the core bench's queues and a backlog of pending workloads, and a Workload
and a Job dict per workload as the controller's cache holds them (frozen out of the garbage
collector's way as the controller does once synced, unless `--no-freeze`). A second
process sends an AdmissionReview for a labelled Job every `--every` seconds and times each
answer. After a warm-up the server runs the first cycle over the whole backlog, either on the
loop (`--mode loop`, as the controller did before issue 11) or through `CoreThread` (`--mode
thread`), and reports the answers sent while it ran.

    python -m bench.loop_stall --pending 30000 --mode both

Figures go to reports, never into tests. The last line printed is one JSON object.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import random
import ssl
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from typing import Any

import aiohttp

from bench.core_bench import SCALES, build, workload
from queuectl.api import names
from queuectl.controller.feed import corethread
from queuectl.controller.feed.corethread import CoreThread
from queuectl.webhooks.certmanager import write_files
from queuectl.webhooks.certs import CertState, generate_ca, generate_serving_cert
from queuectl.webhooks.lookup import InMemoryLookup
from queuectl.webhooks.server import bound_port, start_webhook_server

TIMEOUT_S = 10.0
"""The API server's default webhook timeout: an answer later than this is a refusal."""


def review(seq: int) -> dict[str, Any]:
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": f"probe-{seq}",
            "namespace": "team",
            "labels": {names.LABEL_QUEUE_NAME: "gpu"},
        },
        "spec": {
            "template": {
                "spec": {"containers": [{"name": "c", "image": "x"}], "restartPolicy": "Never"}
            }
        },
    }
    return {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": f"uid-{seq}",
            "kind": {"group": "batch", "version": "v1", "kind": "Job"},
            "resource": {"group": "batch", "version": "v1", "resource": "jobs"},
            "operation": "CREATE",
            "namespace": "team",
            "name": f"probe-{seq}",
            "userInfo": {"username": "alice"},
            "object": job,
        },
    }


# --- the probe (its own process, so the server's GIL does not time it) ---------------------------
async def probe(port: int, ca_file: str, stop_file: str, every: float) -> list[list[float]]:
    """Until `stop_file` exists: [sent (monotonic, shared by both processes), seconds, ok]."""
    trust = ssl.create_default_context(cafile=ca_file)
    samples: list[list[float]] = []
    timeout = aiohttp.ClientTimeout(total=TIMEOUT_S)
    url = f"https://127.0.0.1:{port}{names.WEBHOOK_PATH_MUTATE_JOB}"
    async with aiohttp.ClientSession(timeout=timeout) as session:
        seq = 0
        while not os.path.exists(stop_file):
            seq += 1
            sent = time.monotonic()
            ok = 0.0
            try:
                async with session.post(url, json=review(seq), ssl=trust) as response:
                    body = await response.json()
                    ok = 1.0 if body["response"]["allowed"] else 0.0
            except (TimeoutError, aiohttp.ClientError):
                pass
            samples.append([sent, time.monotonic() - sent, ok])
            await asyncio.sleep(max(0.0, sent + every - time.monotonic()))
    return samples


def cached_objects(seq: int) -> tuple[dict[str, Any], dict[str, Any]]:
    """A Workload and its Job as the controller's cache holds them (plain JSON dicts): what
    makes up most of the controller's heap, and what a full collection walks."""
    labels = {names.LABEL_QUEUE_NAME: "gpu", names.LABEL_PRIORITY_CLASS: "batch"}
    meta: dict[str, Any] = {
        "name": f"job-{seq}",
        "namespace": f"ns-{seq % 97}",
        "uid": f"uid-{seq}",
        "resourceVersion": str(seq),
        "creationTimestamp": "2026-01-01T00:00:00Z",
        "labels": labels,
        "ownerReferences": [{"kind": "Job", "name": f"job-{seq}", "controller": True}],
    }
    requests = {"cpu": "4", "memory": "32Gi", names.GPU_RESOURCE: "1"}
    container = {"name": "main", "image": "trainer:1", "resources": {"requests": requests}}
    template = {"spec": {"containers": [container], "restartPolicy": "Never"}}
    condition = {"type": "QuotaReserved", "status": "False", "reason": "Pending", "message": ""}
    workload_obj = {
        "metadata": meta,
        "spec": {
            "queueName": "gpu",
            "podSets": [{"name": "main", "count": 1, "template": template}],
        },
        "status": {"conditions": [condition]},
    }
    job = {
        "metadata": {**meta, "labels": dict(labels)},
        "spec": {"suspend": True, "parallelism": 1, "template": template},
        "status": {},
    }
    return workload_obj, job


# --- the server --------------------------------------------------------------------------------
async def serve(
    mode: str, pending: int, scale: str, every: float, warmup: float, freeze: bool
) -> dict[str, Any]:
    rnd = random.Random(1)
    sched, queues = build(SCALES[scale], rnd)
    cache = []
    for seq in range(1, pending + 1):
        sched.upsert_workload(workload(seq, queues, rnd, 0.0))
        cache.append(cached_objects(seq))
    if freeze:  # as the controller does once its caches are synced
        gc.collect()
        gc.freeze()
    certs = tempfile.mkdtemp(prefix="loop-stall-")
    now = datetime.now(UTC)
    ca = generate_ca(now)
    write_files(certs, CertState(ca, generate_serving_cert(ca, ["localhost"], ["127.0.0.1"], now)))
    ca_file = os.path.join(certs, "ca.crt")
    stop_file = os.path.join(certs, "stop")
    lookup = InMemoryLookup(local_queues={("team", "gpu"): "team-0000"})
    lookup.cluster_queues["team-0000"] = {}
    runner = await start_webhook_server("127.0.0.1", 0, certs, lookup)

    gaps: list[tuple[float, float]] = []  # (when, gap) of the 10 ms timer

    async def timer() -> None:
        last = time.monotonic()
        while True:
            await asyncio.sleep(0.01)
            t = time.monotonic()
            gaps.append((t, t - last))
            last = t

    ticking = asyncio.create_task(timer())
    client = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "bench.loop_stall",
        "--probe",
        str(bound_port(runner)),
        ca_file,
        stop_file,
        str(every),
        stdout=subprocess.PIPE,
    )
    await asyncio.sleep(warmup)
    cpu: list[float] = []
    real_cycle = sched.run_cycle

    def timed_cycle(now: float) -> Any:
        started = time.thread_time()
        try:
            return real_cycle(now)
        finally:
            cpu.append(time.thread_time() - started)

    sched.run_cycle = timed_cycle  # type: ignore[method-assign]
    collections: list[tuple[float, int, float]] = []  # (when, generation, seconds)
    collecting: dict[str, float] = {}

    def on_gc(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            collecting["at"] = time.monotonic()
        else:
            t = time.monotonic()
            collections.append((t, info["generation"], t - collecting.get("at", t)))

    gc.callbacks.append(on_gc)
    start = time.monotonic()
    if mode == "loop":
        result = sched.run_cycle(1.0)  # what Controller.run_cycle did before issue 11
    else:
        core = CoreThread(sched)
        async with core.cycle(1.0) as result:
            pass
        core.close()
    end = time.monotonic()
    await asyncio.sleep(1.0)
    open(stop_file, "w").close()
    out, _ = await client.communicate()
    ticking.cancel()
    del cache
    gc.callbacks.remove(on_gc)
    await runner.cleanup()
    samples = json.loads(out.decode().strip().splitlines()[-1]) if out.strip() else []
    during = [s for s in samples if start <= s[0] <= end]
    ms = sorted(s[1] * 1000 for s in during)
    stalls = [g for t, g in gaps if start <= t <= end + 1.0]

    def pct(p: float) -> float:
        return round(ms[min(len(ms) - 1, int(len(ms) * p))], 1) if ms else 0.0

    return {
        "mode": mode,
        "gc_freeze": freeze,
        "switch_interval_ms": sys.getswitchinterval() * 1000,
        "pending": pending,
        "scale": scale,
        "cycle_s": round(end - start, 2),
        "cycle_cpu_s": round(cpu[0], 2),
        "admitted": len(result.admitted),
        "probes_during_cycle": len(ms),
        "webhook_ms_p50": round(statistics.median(ms), 1) if ms else None,
        "webhook_ms_p99": pct(0.99),
        "webhook_ms_max": round(ms[-1], 1) if ms else None,
        "refused_or_timed_out": sum(1 for s in during if not s[2]),
        "timer_max_gap_ms": round(max(stalls, default=0.0) * 1000, 1),
        "gc_max_ms_during_cycle": round(
            max((d for t, _, d in collections if start <= t <= end), default=0.0) * 1000, 1
        ),
        "gc_gen2_during_cycle": sum(1 for t, g, _ in collections if start <= t <= end and g == 2),
        "load_avg": os.getloadavg()[0],
    }


def main(argv: list[str]) -> int:
    if argv[:1] == ["--probe"]:
        port, ca_file, stop_file, every = int(argv[1]), argv[2], argv[3], float(argv[4])
        print(json.dumps(asyncio.run(probe(port, ca_file, stop_file, every))))
        return 0
    p = argparse.ArgumentParser(prog="python -m bench.loop_stall", description=__doc__)
    p.add_argument("--pending", type=int, default=30_000)
    p.add_argument("--scale", choices=sorted(SCALES), default="large")
    p.add_argument("--mode", choices=("loop", "thread", "both"), default="both")
    p.add_argument("--every", type=float, default=0.02, help="seconds between probes")
    p.add_argument("--warmup", type=float, default=2.0)
    p.add_argument(
        "--switch-interval",
        type=float,
        default=corethread.SWITCH_INTERVAL_S,
        help="seconds; the controller's by default (CPython's own: 0.005)",
    )
    p.add_argument(
        "--no-freeze",
        dest="freeze",
        action="store_false",
        help="leave the backlog in the collected generations (before issue 11)",
    )
    args = p.parse_args(argv)
    corethread.SWITCH_INTERVAL_S = args.switch_interval
    sys.setswitchinterval(args.switch_interval)
    modes = ("loop", "thread") if args.mode == "both" else (args.mode,)
    results = [
        asyncio.run(serve(m, args.pending, args.scale, args.every, args.warmup, args.freeze))
        for m in modes
    ]
    for r in results:
        print(json.dumps(r))
    print(json.dumps(results))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
