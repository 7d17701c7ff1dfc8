"""The webhook probe: the review it sends is one the real webhook decides, and it tells an
answer from a refusal and a timeout."""

from __future__ import annotations

import asyncio
import base64
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from bench.cluster.probe import ProbeLog, ProbeThread, Target, answered, probe_forever, review
from queuectl.api import names
from queuectl.testenv.ports import free_ports
from queuectl.webhooks.certmanager import write_files
from queuectl.webhooks.certs import CertState, generate_ca, generate_serving_cert
from queuectl.webhooks.jobs import mutate_job
from queuectl.webhooks.lookup import InMemoryLookup
from queuectl.webhooks.review import parse_review
from queuectl.webhooks.review import review as envelope
from queuectl.webhooks.server import bound_port, start_webhook_server
from queuectl.webhooks.tls import ReloadingTLS

NS, QUEUE = "bench-run", "run-co0-cq0"
LOOKUP = InMemoryLookup(local_queues={(NS, QUEUE): QUEUE})


def answer_body(response: dict[str, Any]) -> bytes:
    return json.dumps(envelope(response)).encode()


def test_the_probe_review_is_queued_by_the_real_webhook() -> None:
    request = parse_review(json.dumps(review(NS, QUEUE, "uid-1")))
    response = mutate_job(request, LOOKUP)
    assert answered(200, answer_body(response), "uid-1")
    patch = json.loads(base64.b64decode(response["patch"]))
    assert {"op": "add", "path": "/spec/suspend", "value": True} in patch


def good() -> dict[str, Any]:
    return mutate_job(parse_review(json.dumps(review(NS, QUEUE, "uid-1"))), LOOKUP)


@pytest.mark.parametrize(
    ("status", "body", "why"),
    [
        (500, answer_body(good()), "an HTTP error"),
        (200, answer_body({**good(), "uid": "uid-2"}), "someone else's answer"),
        (200, answer_body({**good(), "allowed": False}), "a refusal"),
        (200, answer_body({k: v for k, v in good().items() if k != "patch"}), "no decision"),
        (200, b"<html>busy</html>", "not a review"),
        (200, answer_body({**good(), "patch": "bm90IGpzb24="}), "a patch that is not JSON"),
    ],
)
def test_anything_but_an_allowed_queuing_answer_is_a_refusal(
    status: int, body: bytes, why: str
) -> None:
    assert not answered(status, body, "uid-1"), why


def test_the_probe_summary() -> None:
    log = ProbeLog(latencies_ms=[float(v) for v in range(1, 101)], timed_out=2)
    log.refuse("ClientConnectorError: refused")
    got = log.summary()
    assert got == {
        "sent": 103,
        "p50": 50.0,
        "p99": 99.0,
        "max": 100.0,
        "refused": 1,
        "timed_out": 2,
        "errors": ["ClientConnectorError: refused"],
    }
    assert ProbeLog().summary()["p99"] is None


@pytest.fixture
def certs(tmp_path: Path) -> Path:
    now = datetime.now(UTC)
    ca = generate_ca(now)
    write_files(tmp_path, CertState(ca, generate_serving_cert(ca, ["svc.ns.svc"], now=now)))
    return tmp_path


async def probe_for(target: Target, seconds: float, **kwargs: Any) -> ProbeLog:
    log = ProbeLog()
    task = asyncio.create_task(probe_forever(target, log, **kwargs))
    await asyncio.sleep(seconds)
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    return log


async def test_probes_of_the_real_webhook_server_are_answered_over_verified_tls(
    certs: Path,
) -> None:
    runner = await start_webhook_server("127.0.0.1", 0, certs, LOOKUP)
    try:
        target = Target(f"https://127.0.0.1:{bound_port(runner)}", str(certs / "ca.crt"), NS, QUEUE)
        log = await probe_for(target, 1.0, every=0.1)
    finally:
        await runner.cleanup()
    assert log.refused == 0 and log.timed_out == 0, log.errors
    assert len(log.latencies_ms) >= 3


async def test_a_closed_port_is_refused_and_a_stuck_server_times_out(certs: Path) -> None:
    (closed,) = free_ports(1)
    log = await probe_for(
        Target(f"https://127.0.0.1:{closed}", str(certs / "ca.crt"), NS, QUEUE), 0.3, every=0.1
    )
    assert log.refused >= 1 and not log.latencies_ms

    release = asyncio.Event()

    async def stuck(_: web.Request) -> web.Response:
        await release.wait()
        return web.Response()

    app = web.Application()
    app.router.add_post(names.WEBHOOK_PATH_MUTATE_JOB, stuck)
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0, ssl_context=ReloadingTLS(certs).base).start()
    try:
        target = Target(f"https://127.0.0.1:{bound_port(runner)}", str(certs / "ca.crt"), NS, QUEUE)
        log = await probe_for(target, 0.5, every=0.1, timeout=0.15)
    finally:
        release.set()
        await runner.cleanup()
    assert log.timed_out >= 1 and log.refused == 0 and not log.latencies_ms


async def test_the_probe_thread_probes_the_real_server_from_a_loop_of_its_own(
    certs: Path,
) -> None:
    runner = await start_webhook_server("127.0.0.1", 0, certs, LOOKUP)
    log = ProbeLog()
    url = f"https://127.0.0.1:{bound_port(runner)}"
    thread = ProbeThread(Target(url, str(certs / "ca.crt"), NS, QUEUE), log, every=0.1)
    try:
        thread.start()
        await asyncio.sleep(1.0)
    finally:
        await asyncio.to_thread(thread.stop)
        await runner.cleanup()
    assert thread.error is None
    assert log.refused == 0 and log.timed_out == 0, log.errors
    assert len(log.latencies_ms) >= 3


def test_a_probe_that_cannot_start_says_why_and_lets_the_run_go_on(tmp_path: Path) -> None:
    log = ProbeLog()
    target = Target("https://127.0.0.1:1", str(tmp_path / "missing-ca.crt"), NS, QUEUE)
    thread = ProbeThread(target, log)
    thread.start()
    thread.stop()
    assert isinstance(thread.error, OSError)
    assert log.errors and "the probe stopped" in log.errors[0]
    assert log.summary()["sent"] == 0
