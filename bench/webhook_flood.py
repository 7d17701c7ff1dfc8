"""`python -m bench webhooks`: hostile AdmissionReviews over TLS against the real webhook server.

The server runs in its own process (as in the controller) with a fresh CA; this process sends
`--requests` malformed or odd-typed reviews (deep nesting, junk bytes, every envelope field
replaced by values of every JSON type) over `--concurrency` TLS connections, `--slow` half-sent
bodies that stall, and one good review every half second. It prints what came back: HTTP 500s
and decisions that raised must both be 0, every slow body must get its 408, and good reviews
must keep being answered during the flood.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import multiprocessing
import random
import ssl
import tempfile
import time
from datetime import UTC, datetime
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from queuectl import metrics
from queuectl.api import names
from queuectl.webhooks.certmanager import write_files
from queuectl.webhooks.certs import CertState, generate_ca, generate_serving_cert
from queuectl.webhooks.lookup import InMemoryLookup
from queuectl.webhooks.server import bound_port, start_webhook_server

ROUTES = (
    names.WEBHOOK_PATH_MUTATE_JOB,
    names.WEBHOOK_PATH_MUTATE_UNLABELLED_JOB,
    names.WEBHOOK_PATH_VALIDATE_JOB,
    names.WEBHOOK_PATH_VALIDATE_WORKLOAD,
)
ODD: list[Any] = [None, True, 0, -1.5, "", "x", [], [1], {}, {"a": []}]
FIELDS = ["uid", "kind", "operation", "name", "namespace", "userInfo", "object", "oldObject",
          "dryRun", "object.metadata", "object.spec", "object.metadata.labels",
          "object.spec.template", "object.spec.suspend", "userInfo.username",
          # the pod-set fields the job decisions read (webhooks/wellformed.py)
          "object.spec.parallelism", "object.spec.completions",
          "object.spec.template.metadata", "object.spec.template.spec.containers",
          "object.spec.template.spec.schedulingGates", "oldObject.spec.template.spec"]  # fmt: skip


def good_review(update: bool = False) -> dict[str, Any]:
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "train", "namespace": "team-a",
                     "labels": {names.LABEL_QUEUE_NAME: "gpu"}},
        "spec": {"template": {"spec": {"containers": [{"name": "c", "image": "x"}]}}},
    }  # fmt: skip
    request = {
        "uid": "0df28fbd-5f5f-11e8-bc74-36e6bb280816",
        "kind": {"group": "batch", "version": "v1", "kind": "Job"},
        "operation": "CREATE",
        "name": "train",
        "namespace": "team-a",
        "userInfo": {"username": "alice", "groups": ["system:authenticated"]},
        "object": job,
        "oldObject": None,
    }
    if update:  # an update compares the old shape with the new one
        request.update(operation="UPDATE", oldObject=json.loads(json.dumps(job)))
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}


def hostile_bodies(count: int, seed: int = 1) -> list[tuple[str, bytes]]:
    rnd = random.Random(seed)
    out: list[tuple[str, bytes]] = []
    while len(out) < count:
        roll = rnd.random()
        if roll < 0.05:
            depth = rnd.choice([500, 1000, 5000, 100_000])
            out.append(("deep", b'{"a":' * depth + b"1" + b"}" * depth))
        elif roll < 0.1:
            out.append(("junk", bytes(rnd.getrandbits(8) for _ in range(200))))
        else:
            review = good_review(update=rnd.random() < 0.5)
            for _ in range(rnd.randint(1, 3)):
                *parents, last = rnd.choice(FIELDS).split(".")
                node: Any = review["request"]
                for part in parents:
                    node = node.get(part) if isinstance(node, dict) else None
                if isinstance(node, dict):
                    node[last] = json.loads(json.dumps(rnd.choice(ODD)))
            out.append(("odd-typed", json.dumps(review).encode()))
    return out


def _serve(cert_dir: Path, conn: Connection) -> None:
    async def run() -> None:
        lookup = InMemoryLookup(local_queues={("team-a", "gpu"): "cq-a"})
        runner = await start_webhook_server("127.0.0.1", 0, cert_dir, lookup)
        conn.send(bound_port(runner))
        await asyncio.get_running_loop().run_in_executor(None, conn.recv)
        counts = {}
        for family in metrics.CONTROLLER_REGISTRY.collect():
            if family.name.startswith("queuectl_webhook"):
                for s in family.samples:
                    if s.name.endswith("_total") and s.value:
                        counts[f"{s.name}{sorted(s.labels.items())}"] = s.value
        conn.send(counts)
        await runner.cleanup()

    asyncio.run(run())


async def _post(
    port: int, trust: ssl.SSLContext, path: str, body: bytes, declared: int | None = None
) -> tuple[int, bytes, float]:
    """(status, whole answer, seconds until the status line)."""
    start = time.monotonic()
    reader, writer = await asyncio.open_connection("127.0.0.1", port, ssl=trust)
    head = (
        f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        f"Content-Length: {declared or len(body)}\r\nConnection: close\r\n\r\n"
    ).encode()
    writer.write(head + body)
    await writer.drain()
    first = await asyncio.wait_for(reader.readline(), 120)
    answered = time.monotonic() - start
    rest = await asyncio.wait_for(reader.read(), 120)
    writer.close()
    return int(first.split(b" ", 2)[1]), first + rest, answered


async def flood(port: int, trust: ssl.SSLContext, args: argparse.Namespace) -> dict[str, Any]:
    statuses: collections.Counter[str] = collections.Counter()
    raised = 0
    gate = asyncio.Semaphore(args.concurrency)

    async def hostile(i: int, kind: str, body: bytes) -> None:
        nonlocal raised
        async with gate:
            status, answer, _ = await _post(port, trust, ROUTES[i % len(ROUTES)], body)
        statuses[f"{kind} {status}"] += 1
        raised += status == 200 and b'"code": 500' in answer

    async def slow() -> float:
        status, _, answered = await _post(port, trust, ROUTES[0], b'{"apiVersion": "adm', 1000)
        statuses[f"slow {status}"] += 1
        return answered

    good = json.dumps(good_review()).encode()
    latencies: list[float] = []

    async def probe() -> None:
        for _ in range(args.probes):
            status, _, answered = await _post(port, trust, ROUTES[0], good)
            statuses[f"good {status}"] += 1
            latencies.append(answered)
            await asyncio.sleep(0.5)

    start = time.monotonic()
    slow_tasks = [asyncio.create_task(slow()) for _ in range(args.slow)]
    await asyncio.gather(
        *(hostile(i, k, b) for i, (k, b) in enumerate(hostile_bodies(args.requests))), probe()
    )
    slow_times = await asyncio.gather(*slow_tasks)
    latencies.sort()
    return {
        "requests": args.requests + args.slow + args.probes,
        "wall_s": round(time.monotonic() - start, 1),
        "answers": dict(sorted(statuses.items())),
        "http_500": sum(v for k, v in statuses.items() if k.endswith(" 500")),
        "decisions_raised": raised,
        "slow_408_after_s": [round(min(slow_times), 1), round(max(slow_times), 1)],
        "good_latency_s": {"median": round(latencies[len(latencies) // 2], 3),
                           "max": round(latencies[-1], 3)},
    }  # fmt: skip


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench webhooks", description=__doc__)
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--slow", type=int, default=50, help="half-sent bodies that stall")
    parser.add_argument("--probes", type=int, default=20, help="good reviews, one per 0.5 s")
    parser.add_argument("--concurrency", type=int, default=32)
    args = parser.parse_args(argv)
    cert_dir = Path(tempfile.mkdtemp(prefix="bench-webhooks-"))
    now = datetime.now(UTC)
    ca = generate_ca(now)
    write_files(cert_dir, CertState(ca, generate_serving_cert(ca, ["bench"], now=now)))
    here, there = multiprocessing.Pipe()
    server = multiprocessing.Process(target=_serve, args=(cert_dir, there))
    server.start()
    try:
        port = here.recv()
        trust = ssl.create_default_context(cadata=ca.cert_pem.decode())
        result = asyncio.run(flood(port, trust, args))
        here.send("stop")
        result["server_counters"] = here.recv()
    finally:
        server.join(30)
        if server.is_alive():
            server.kill()
    print(json.dumps(result, indent=2))
    ok = result["http_500"] == 0 and result["decisions_raised"] == 0
    ok = ok and result["answers"].get("slow 408", 0) == args.slow
    return 0 if ok else 1
