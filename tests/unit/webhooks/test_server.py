"""The HTTP shell: malformed reviews get 400 with a reason, decisions are wrapped, TLS reloads."""

from __future__ import annotations

import asyncio
import json
import ssl
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer
from cryptography import x509
from webhook_cases import job, request

from queuectl import metrics
from queuectl.api import names
from queuectl.webhooks.certmanager import write_files
from queuectl.webhooks.certs import CertState, generate_ca, generate_serving_cert
from queuectl.webhooks.lookup import InMemoryLookup
from queuectl.webhooks.review import decode_patch
from queuectl.webhooks.server import bound_port, make_app, reloading_tls, start_webhook_server


@pytest.fixture
async def client(lookup: InMemoryLookup) -> AsyncIterator[TestClient[Any, Any]]:
    async with TestClient(TestServer(make_app(lookup))) as test_client:
        yield test_client


def envelope(req: Any, **overrides: Any) -> dict[str, Any]:
    return {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": req,
    } | overrides


GOOD = request(job({names.LABEL_QUEUE_NAME: "gpu"}))
ROUTES = [
    names.WEBHOOK_PATH_MUTATE_JOB,
    names.WEBHOOK_PATH_MUTATE_UNLABELLED_JOB,
    names.WEBHOOK_PATH_VALIDATE_JOB,
    names.WEBHOOK_PATH_VALIDATE_QUEUECTL,
    names.WEBHOOK_PATH_VALIDATE_WORKLOAD,
]


@pytest.mark.parametrize(
    ("scenario", "body", "reason"),
    [
        ("not JSON", b"{nope", "body is not JSON"),
        ("not UTF-8", b"\xff\xfe\x00", "body is not JSON"),
        ("JSON but not an object", b"[1, 2]", "must be a JSON object"),
        (
            "v1beta1 review",
            envelope(GOOD, apiVersion="admission.k8s.io/v1beta1"),
            "apiVersion must be",
        ),
        ("wrong kind", envelope(GOOD, kind="TokenReview"), "kind must be 'AdmissionReview'"),
        ("no request", envelope(None), "request is missing"),
        (
            "no uid",
            envelope({k: v for k, v in GOOD.items() if k != "uid"}),
            "request.uid is missing",
        ),
        ("empty uid", envelope(GOOD | {"uid": ""}), "request.uid is missing"),
        ("no request.kind", envelope(GOOD | {"kind": "Job"}), "request.kind must be an object"),
        ("odd operation", envelope(GOOD | {"operation": "PATCH"}), "request.operation must be"),
        ("object not an object", envelope(GOOD | {"object": "x"}), "request.object must be"),
        ("nested 1,000 deep", b'{"a":' * 1000 + b"1" + b"}" * 1000, "nested too deeply"),
        (
            "nested 100,000 deep request",
            b'{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":'
            + b"[" * 100_000
            + b"]" * 100_000
            + b"}",
            "nested too deeply",
        ),
        ("unhashable operation", envelope(GOOD | {"operation": ["CREATE"]}), "operation must"),
        ("object operation", envelope(GOOD | {"operation": {"a": 1}}), "operation must be"),
        ("numeric kind.group", envelope(GOOD | {"kind": {"kind": "Job", "group": 1}}), "group"),
        ("namespace a list", envelope(GOOD | {"namespace": ["a"]}), "request.namespace must"),
        ("dryRun a string", envelope(GOOD | {"dryRun": "yes"}), "request.dryRun must be"),
        ("userInfo a string", envelope(GOOD | {"userInfo": "root"}), "request.userInfo must"),
        (
            "username a number",
            envelope(GOOD | {"userInfo": {"username": 7}}),
            "request.userInfo.username must",
        ),
        (
            "groups not strings",
            envelope(GOOD | {"userInfo": {"username": "a", "groups": [{}]}}),
            "request.userInfo.groups must",
        ),
        (
            "metadata a list",
            envelope(GOOD | {"object": {"metadata": []}}),
            "request.object.metadata must",
        ),
        (
            "labels a list",
            envelope(GOOD | {"object": {"metadata": {"labels": ["a"]}}}),
            "request.object.metadata.labels must map",
        ),
        (
            "label value a number",
            envelope(GOOD | {"oldObject": {"metadata": {"labels": {"a": 1}}}}),
            "request.oldObject.metadata.labels must map",
        ),
        (
            "annotations unhashable",
            envelope(GOOD | {"object": {"metadata": {"annotations": {"a": []}}}}),
            "annotations must map",
        ),
        ("spec a string", envelope(GOOD | {"object": {"spec": "x"}}), "request.object.spec must"),
        (
            "ownerReferences of strings",
            envelope(GOOD | {"object": {"metadata": {"ownerReferences": ["x"]}}}),
            "ownerReferences must",
        ),
    ],
)
@pytest.mark.parametrize("path", ROUTES)
async def test_malformed_reviews_get_400_with_a_reason(
    client: TestClient[Any, Any], path: str, scenario: str, body: Any, reason: str
) -> None:
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    response = await client.post(path, data=data)
    assert response.status == 400, scenario
    assert reason in (await response.json())["error"], scenario


async def test_a_review_gets_a_review_back_with_the_patch(client: TestClient[Any, Any]) -> None:
    response = await client.post(names.WEBHOOK_PATH_MUTATE_JOB, json=envelope(GOOD))
    assert response.status == 200
    body = await response.json()
    assert body["apiVersion"] == "admission.k8s.io/v1" and body["kind"] == "AdmissionReview"
    assert body["response"]["uid"] == GOOD["uid"] and body["response"]["allowed"] is True
    assert {"op": "add", "path": "/spec/suspend", "value": True} in decode_patch(body["response"])


async def test_validate_job_route_refuses_a_hand_unsuspend(client: TestClient[Any, Any]) -> None:
    labels = {names.LABEL_QUEUE_NAME: "gpu", names.LABEL_CLUSTER_QUEUE: "cq-a"}
    req = request(job(labels, False), old=job(labels, True))
    body = await (await client.post(names.WEBHOOK_PATH_VALIDATE_JOB, json=envelope(req))).json()
    assert body["response"]["allowed"] is False
    assert "cannot be unsuspended by hand" in body["response"]["status"]["message"]


class BrokenLookup(InMemoryLookup):
    def local_queue(self, namespace: str, name: str) -> str | None:
        raise KeyError("cache torn")

    def is_job_admitted(self, namespace: str, job_name: str) -> bool:
        raise KeyError("cache torn")


QUEUED = {names.LABEL_QUEUE_NAME: "gpu"}


@pytest.mark.parametrize(
    ("path", "req", "allowed"),
    [
        (names.WEBHOOK_PATH_MUTATE_JOB, GOOD, False),
        (
            names.WEBHOOK_PATH_VALIDATE_JOB,
            request(job(QUEUED, False), old=job(QUEUED, True)),
            False,
        ),
        # Sees every Job create in the cluster: an internal error there must not refuse them all.
        (names.WEBHOOK_PATH_MUTATE_UNLABELLED_JOB, request(job()), True),
    ],
)
async def test_a_failing_decision_is_answered_as_its_route_fails_not_a_crash(
    path: str, req: dict[str, Any], allowed: bool
) -> None:
    errors = metrics.WEBHOOK_INTERNAL_ERRORS.labels(
        route=path, answer="allowed" if allowed else "denied"
    )
    before = errors._value.get()
    async with TestClient(TestServer(make_app(BrokenLookup()))) as broken:
        response = await broken.post(path, json=envelope(req))
        assert response.status == 200
        answer = (await response.json())["response"]
        assert answer["allowed"] is allowed
        if allowed:
            assert "failed internally" in answer["warnings"][0]
        else:
            assert answer["status"]["code"] == 500
            assert "failed internally" in answer["status"]["message"]
        assert errors._value.get() == before + 1
        health = await broken.get(names.WEBHOOK_PATH_HEALTHZ)
        assert health.status == 200 and await health.text() == "ok"


# --- TLS ------------------------------------------------------------------------------


async def peer_certificate(port: int, trust: ssl.SSLContext) -> x509.Certificate:
    """Handshake with the server as the API server would (IP URL, so no SNI) and return its cert."""
    _, writer = await asyncio.open_connection("127.0.0.1", port, ssl=trust)
    der = writer.get_extra_info("ssl_object").getpeercert(binary_form=True)
    writer.close()
    await writer.wait_closed()
    return x509.load_der_x509_certificate(der)


async def test_served_certificate_follows_the_files_without_restart(
    tmp_path: Path, lookup: InMemoryLookup
) -> None:
    now = datetime.now(UTC)
    ca = generate_ca(now)
    first = CertState(ca, generate_serving_cert(ca, ["svc.ns.svc"], now=now))
    write_files(tmp_path, first)
    trust = ssl.create_default_context(cadata=ca.cert_pem.decode())
    runner = await start_webhook_server("127.0.0.1", 0, tmp_path, lookup, min_cert_check_interval=0)
    try:
        port = bound_port(runner)
        assert (
            await peer_certificate(port, trust)
        ).serial_number == first.serving.cert.serial_number

        second = CertState(ca, generate_serving_cert(ca, ["svc.ns.svc"], now=now))
        write_files(tmp_path, second)
        assert (
            await peer_certificate(port, trust)
        ).serial_number == second.serving.cert.serial_number
        assert reloading_tls(runner).reloads == 1

        (tmp_path / "tls.crt").write_bytes(b"half written")
        assert (
            await peer_certificate(port, trust)
        ).serial_number == second.serving.cert.serial_number
        assert reloading_tls(runner).reloads == 1, "unloadable files keep the previous certificate"
    finally:
        await runner.cleanup()
