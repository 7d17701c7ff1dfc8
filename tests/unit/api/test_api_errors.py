"""Which failures count as transient API trouble: one table for every loop that retries."""

from __future__ import annotations

import asyncio
import json

import aiohttp
import pytest
from kubernetes_asyncio.client.exceptions import ApiException

from queuectl.api.errors import is_transient
from queuectl.controller.watch.kube import KubeError

TRANSIENT = [
    aiohttp.ServerDisconnectedError(),
    aiohttp.ClientConnectionError("connection closed"),
    aiohttp.ClientOSError(104, "Connection reset by peer"),
    aiohttp.ServerTimeoutError("read timeout"),
    aiohttp.ClientPayloadError("Response payload is not completed"),
    TimeoutError(),
    ConnectionResetError(104, "reset"),
    ConnectionRefusedError(111, "refused"),
    asyncio.IncompleteReadError(b"", 10),
    KubeError(500, "InternalError", "etcdserver: request timed out"),
    KubeError(503, "ServiceUnavailable", "apiserver is shutting down"),
    KubeError(504, "Timeout", "the server was unable to return a response in time"),
    KubeError(429, "TooManyRequests", "storage is (re)initializing"),
    KubeError(408, "Timeout", "request timeout"),
    ApiException(status=503, reason="Service Unavailable"),
    ApiException(status=429, reason="Too Many Requests"),
]

FINAL = [
    KubeError(409, "Conflict", "the object has been modified"),
    KubeError(404, "NotFound", "x"),
    KubeError(403, "Forbidden", "x"),
    KubeError(422, "Invalid", "x"),
    ApiException(status=404, reason="Not Found"),
    ValueError("a bug"),
    KeyError("metadata"),
    json.JSONDecodeError("Expecting value", "", 0),
]


@pytest.mark.parametrize("err", TRANSIENT, ids=lambda e: f"{type(e).__name__}")
def test_transport_errors_and_server_trouble_are_transient(err: BaseException) -> None:
    assert is_transient(err)


@pytest.mark.parametrize("err", FINAL, ids=lambda e: f"{type(e).__name__}")
def test_answers_and_bugs_are_not(err: BaseException) -> None:
    assert not is_transient(err)
