"""Hostile clients at the HTTP layer: huge, slow and half-sent bodies, over real TLS.

Each ends in an HTTP answer with a reason (or a closed connection), the server keeps serving, and
nothing waits longer than the read timeout for a body that never comes.
"""

from __future__ import annotations

import asyncio
import json
import ssl
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer
from webhook_cases import job, request

from bench.chaos import hostile
from queuectl import metrics
from queuectl.api import names
from queuectl.webhooks.certmanager import write_files
from queuectl.webhooks.certs import CertState, generate_ca, generate_serving_cert
from queuectl.webhooks.lookup import InMemoryLookup
from queuectl.webhooks.server import MAX_BODY_BYTES, bound_port, make_app, start_webhook_server

READ_TIMEOUT = 1.0  # short so the test is quick; production uses server.BODY_READ_TIMEOUT (10 s)
PATH = names.WEBHOOK_PATH_MUTATE_JOB


def good_body() -> bytes:
    review = {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": request(job({names.LABEL_QUEUE_NAME: "gpu"})),
    }
    return json.dumps(review).encode()


@dataclass
class Served:
    port: int
    trust: ssl.SSLContext

    async def send(self, head: bytes, body: bytes) -> tuple[asyncio.StreamReader, Any]:
        reader, writer = await asyncio.open_connection("127.0.0.1", self.port, ssl=self.trust)
        writer.write(head + body)
        await writer.drain()
        return reader, writer

    async def post(self, body: bytes, declared: int | None = None) -> tuple[int, bytes]:
        """POST body (declaring `declared` bytes) and read the whole answer."""
        reader, writer = await self.send(head(declared or len(body)), body)
        try:
            answer = await asyncio.wait_for(reader.read(), timeout=60)
        finally:
            writer.close()
        status = int(answer.split(b" ", 2)[1])
        return status, answer.split(b"\r\n\r\n", 1)[1]


def head(length: int) -> bytes:
    return (
        f"POST {PATH} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        f"Content-Length: {length}\r\nConnection: close\r\n\r\n"
    ).encode()


@pytest.fixture
async def served(tmp_path: Path, lookup: InMemoryLookup) -> AsyncIterator[Served]:
    now = datetime.now(UTC)
    ca = generate_ca(now)
    write_files(tmp_path, CertState(ca, generate_serving_cert(ca, ["svc.ns.svc"], now=now)))
    runner = await start_webhook_server("127.0.0.1", 0, tmp_path, lookup, read_timeout=READ_TIMEOUT)
    try:
        yield Served(bound_port(runner), ssl.create_default_context(cadata=ca.cert_pem.decode()))
    finally:
        await runner.cleanup()


async def test_a_body_sent_too_slowly_gets_408_and_the_server_keeps_serving(
    served: Served,
) -> None:
    timeouts = metrics.WEBHOOK_REJECTED_REQUESTS.labels(route=PATH, reason="read_timeout")
    before = timeouts._value.get()
    body = good_body()
    # Half the body, then silence: the server must answer instead of holding the request open.
    status, answer = await served.post(body[: len(body) // 2], declared=len(body))
    assert status == 408
    assert "not received within 1 s" in json.loads(answer)["error"]
    assert timeouts._value.get() == before + 1
    status, answer = await served.post(good_body())
    assert status == 200 and json.loads(answer)["response"]["allowed"] is True


async def test_a_half_sent_body_then_a_hang_up_leaves_the_server_serving(served: Served) -> None:
    body = good_body()
    _, writer = await served.send(head(len(body)), body[:100])
    writer.close()
    status, answer = await served.post(body)
    assert status == 200 and json.loads(answer)["response"]["allowed"] is True


async def test_a_body_over_the_limit_gets_413(lookup: InMemoryLookup) -> None:
    async with TestClient(TestServer(make_app(lookup))) as client:
        response = await client.post(PATH, data=b" " * (MAX_BODY_BYTES + 1))
        assert response.status == 413
        assert f"larger than {MAX_BODY_BYTES} bytes" in (await response.json())["error"]


async def test_many_hostile_reviews_never_get_a_500(lookup: InMemoryLookup) -> None:
    """Every field of a good review replaced by values of every JSON type: 200 or 400, never 500."""
    odd: list[Any] = [None, True, 0, -1.5, "", "x", [], [1], {}, {"a": []}]
    fields = [*json.loads(good_body())["request"], "object.metadata", "object.spec"]
    bodies = []
    inner = ["object.metadata.name", "object.metadata.labels"]
    inner += ["object.spec.parallelism", "object.spec.template", "object.spec.template.metadata"]
    inner += ["object.spec.completions", "object.spec.template.spec",
              "object.spec.template.spec.containers"]  # fmt: skip
    for field in [*fields, *inner]:
        for value in odd:
            review = json.loads(good_body())
            target, *rest = field.split(".")
            if rest:
                node = review["request"][target]
                for part in rest[:-1]:
                    node = node[part]
                node[rest[-1]] = value
            else:
                review["request"][target] = value
            bodies.append(json.dumps(review).encode())
    async with TestClient(TestServer(make_app(lookup))) as client:
        for route in (PATH, names.WEBHOOK_PATH_VALIDATE_JOB, names.WEBHOOK_PATH_VALIDATE_WORKLOAD):
            for body in bodies:
                response = await client.post(route, data=body)
                assert response.status in (200, 400), body
                answer = await response.json()
                if response.status == 200:
                    assert answer["response"].get("status", {}).get("code") != 500, body


async def test_the_chaos_barrages_bodies_get_a_reason_never_an_internal_error(
    lookup: InMemoryLookup,
) -> None:
    """The bodies `python -m bench chaos` fires at a replica, on every route it fires them at:
    the ones with a field of the wrong type where a decision reads it are denied naming it."""
    typed = {"parallelism-abc-update", "containers-string", "gates-string",
             "resource-group-string"}  # fmt: skip
    denied: dict[str, set[str]] = {}
    async with TestClient(TestServer(make_app(lookup))) as client:
        for what, body in hostile.bodies():
            if what == "too-large":
                continue
            for route in hostile.PATHS:
                response = await client.post(route, data=body)
                assert response.status in (200, 400), (what, route)
                if response.status != 200:
                    continue
                status = (await response.json())["response"].get("status") or {}
                assert status.get("code", 200) < 500, (what, route, status)
                if "was not sent by it" in status.get("message", ""):
                    denied.setdefault(what, set()).add(route)
    assert typed <= set(denied), f"not denied by type: {typed - set(denied)}"
