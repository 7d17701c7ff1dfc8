"""The certificate loop outlives API trouble: certificates that stop rotating would fail every
webhook call later, so no dropped connection, API-server restart or bug may end it."""

from __future__ import annotations

import asyncio

import aiohttp
import pytest
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from queuectl.webhooks.certmanager import CertManager

ERRORS: list[BaseException] = [
    aiohttp.ServerDisconnectedError(),
    aiohttp.ClientOSError(111, "Connection refused"),
    aiohttp.ClientPayloadError("Response payload is not completed"),
    TimeoutError(),
    ApiException(status=503, reason="Service Unavailable"),
    KeyError("a bug"),
]


@pytest.mark.parametrize("err", ERRORS, ids=lambda e: type(e).__name__)
async def test_a_failed_round_is_retried_soon_and_the_loop_goes_on(
    err: BaseException, tmp_path: object
) -> None:
    api = client.ApiClient(client.Configuration())
    try:
        certs = CertManager(api, str(tmp_path))
        rounds: list[int] = []
        second = asyncio.Event()

        async def ensure() -> None:
            rounds.append(len(rounds))
            if len(rounds) == 1:
                raise err
            second.set()

        certs.ensure = ensure  # type: ignore[assignment,method-assign]
        loop = asyncio.create_task(certs.run(interval_seconds=3600, retry_seconds=0.01))
        try:
            await asyncio.wait_for(second.wait(), 30)  # a hang guard; the retry is 10 ms away
            assert not loop.done()
        finally:
            loop.cancel()
    finally:
        await api.close()
