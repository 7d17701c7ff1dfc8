"""Malformed and hostile AdmissionReviews sent over TLS straight to a replica's webhook port.

Every answer must be HTTP 2xx (a review, allowed or not, with a code below 500) or 4xx with a
reason; an HTTP 5xx or a review that says the webhook failed internally counts as an internal
error. Slow bodies (headers promising more than is ever sent) must be closed by the server
within `patience` seconds, or they count as held.
"""

from __future__ import annotations

import asyncio
import json
import ssl
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field

import aiohttp

from queuectl.api import names

PATHS = (
    names.WEBHOOK_PATH_MUTATE_JOB,
    names.WEBHOOK_PATH_VALIDATE_JOB,
    names.WEBHOOK_PATH_VALIDATE_QUEUECTL,
    names.WEBHOOK_PATH_VALIDATE_POD,
)


def _review(request: object) -> bytes:
    return json.dumps(
        {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}
    ).encode()


def _job(**spec: object) -> dict[str, object]:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "x", "namespace": "default", "labels": {names.LABEL_QUEUE_NAME: "q"}},
        "spec": spec,
    }


def _pod(**spec: object) -> dict[str, object]:
    labels = {names.LABEL_QUEUE_NAME: "q", names.LABEL_POD_GROUP_NAME: "g"}
    return {"apiVersion": "v1", "kind": "Pod", "spec": spec,
            "metadata": {"name": "p", "namespace": "default", "labels": labels}}  # fmt: skip


def _request(**fields: object) -> dict[str, object]:
    base: dict[str, object] = {
        "uid": "u-1",
        "kind": {"group": "batch", "version": "v1", "kind": "Job"},
        "resource": {"group": "batch", "version": "v1", "resource": "jobs"},
        "operation": "CREATE",
        "namespace": "default",
        "userInfo": {"username": "mallory"},
        "object": _job(parallelism=1),
    }
    base.update(fields)
    return base


def bodies() -> list[tuple[str, bytes]]:
    """(what, body): one of each hostile shape."""
    deep = b'{"a":' * 1000 + b"1" + b"}" * 1000
    return [
        ("nested-1000", b'{"request":' + deep + b"}"),
        ("nested-list", b"[" * 5000 + b"]" * 5000),
        ("unhashable-operation", _review(_request(operation=["CREATE"]))),
        ("dict-operation", _review(_request(operation={"a": 1}))),
        ("uid-number", _review(_request(uid=7))),
        ("request-null", _review(None)),
        ("request-list", _review([1, 2])),
        ("object-string", _review(_request(object="job"))),
        ("object-null", _review(_request(object=None))),
        ("labels-list", _review(_request(object={**_job(), "metadata": {"labels": ["a"]}}))),
        ("spec-list", _review(_request(object={**_job(), "spec": [1]}))),
        ("parallelism-string", _review(_request(object=_job(parallelism="many")))),
        ("parallelism-negative", _review(_request(object=_job(parallelism=-5)))),
        ("template-number", _review(_request(object=_job(template=3)))),
        ("containers-dict", _review(_request(object=_job(template={"spec": {"containers": {}}})))),
        ("requests-bad", _review(_request(object=_job(template={"spec": {"containers": [
            {"resources": {"requests": {names.GPU_RESOURCE: "lots"}}}]}})))),
        ("update-no-old", _review(_request(operation="UPDATE", oldObject=None))),
        # well-formed envelopes, a field of the wrong type where a decision reads it
        ("parallelism-abc-update", _review(_request(operation="UPDATE",
            object=_job(parallelism="abc"), oldObject=_job(parallelism=1)))),
        ("containers-string", _review(_request(object=_job(template={"spec": {
            "containers": "c"}})))),
        ("gates-string", _review(_request(kind={"group": "", "version": "v1", "kind": "Pod"},
            object=_pod(schedulingGates="queuectl.io/admission")))),
        ("resource-group-string", _review(_request(
            kind={"group": names.GROUP, "version": "v1beta1", "kind": "ClusterQueue"},
            object={"metadata": {"name": "cq"}, "spec": {"resourceGroups": ["h100"]}}))),
        ("kind-missing", _review({k: v for k, v in _request().items() if k != "kind"})),
        ("not-json", b"\x00\xff{not json"),
        ("empty", b""),
        ("utf16", '{"request": {}}'.encode("utf-16")),
        ("huge-number", b'{"request": {"uid": 1e999999}}'),
        ("nan", b'{"request": {"uid": NaN}}'),
        ("big-string", _review(_request(uid="u" * 2_000_000))),
        ("too-large", b'{"a":"' + b"x" * (9 * 1024 * 1024) + b'"}'),
    ]  # fmt: skip


@dataclass
class HostileResult:
    sent: int = 0
    statuses: Counter[int] = field(default_factory=Counter)
    internal_errors: list[str] = field(default_factory=list)
    transport_errors: int = 0
    slow_sent: int = 0
    slow_held: int = 0  # slow bodies the server still held after `patience`
    slow_closed_after: list[float] = field(default_factory=list)


def _cycle(count: int) -> Iterator[tuple[str, str, bytes]]:
    shapes = bodies()
    for i in range(count):
        what, body = shapes[i % len(shapes)]
        yield what, PATHS[(i // len(shapes)) % len(PATHS)], body


async def _one(
    session: aiohttp.ClientSession, url: str, what: str, body: bytes, out: HostileResult
) -> None:
    try:
        async with session.post(url, data=body, headers={"Content-Type": "application/json"}) as r:
            text = await r.read()
            out.statuses[r.status] += 1
            if r.status >= 500:
                out.internal_errors.append(f"{what}: HTTP {r.status}")
            elif r.status < 300:
                code = ((json.loads(text).get("response") or {}).get("status") or {}).get("code")
                if isinstance(code, int) and code >= 500:
                    out.internal_errors.append(f"{what}: review code {code}")
    except (aiohttp.ClientError, TimeoutError, ValueError):
        out.transport_errors += 1


async def _slow(port: int, tls: ssl.SSLContext, patience: float, out: HostileResult) -> None:
    """Headers promise 4 KiB, 10 bytes come, then nothing: the server must give up."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port, ssl=tls)
    out.slow_sent += 1
    writer.write(
        f"POST {names.WEBHOOK_PATH_VALIDATE_JOB} HTTP/1.1\r\nHost: x\r\n"
        "Content-Type: application/json\r\nContent-Length: 4096\r\n\r\n".encode()
        + b'{"request"'
    )
    await writer.drain()
    started = time.monotonic()
    try:
        await asyncio.wait_for(reader.read(), patience)  # EOF (or an answer) when it gives up
        out.slow_closed_after.append(time.monotonic() - started)
    except TimeoutError:
        out.slow_held += 1
    except OSError:
        out.slow_closed_after.append(time.monotonic() - started)
    finally:
        writer.transport.abort()


async def barrage(port: int, count: int, slow: int, patience: float) -> HostileResult:
    out = HostileResult()
    tls = ssl.create_default_context()
    tls.check_hostname = False
    tls.verify_mode = ssl.CERT_NONE  # the CA is the controller's own; TLS is what matters here
    slow_tasks = [asyncio.ensure_future(_slow(port, tls, patience, out)) for _ in range(slow)]
    connector = aiohttp.TCPConnector(ssl=tls, limit=8)
    timeout = aiohttp.ClientTimeout(total=30)
    async with aiohttp.ClientSession(connector=connector, timeout=timeout) as session:
        pending: set[asyncio.Future[None]] = set()
        for what, path, body in _cycle(count):
            out.sent += 1
            url = f"https://127.0.0.1:{port}{path}"
            pending.add(asyncio.ensure_future(_one(session, url, what, body, out)))
            if len(pending) >= 16:
                _, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
        await asyncio.gather(*pending)
    await asyncio.gather(*slow_tasks, return_exceptions=True)
    return out


def send(port: int, count: int, slow: int, patience: float) -> HostileResult:
    return asyncio.run(barrage(port, count, slow, patience))
