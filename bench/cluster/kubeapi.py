"""A minimal async API client for the load generator: raw aiohttp, dicts, bounded concurrency.

The runner shares two cores with the API server and the controller, so it skips the generated
clients entirely: kubernetes_asyncio only reads the kubeconfig, every request is one aiohttp call
with JSON decoded once, and a semaphore bounds the requests in flight. It counts its own
requests, so the API server's totals can be split into ours and the controller's.
"""

from __future__ import annotations

import asyncio
import json
import ssl
from collections.abc import AsyncIterator
from typing import Any, Final

import aiohttp
from kubernetes_asyncio import client as k8s_client
from kubernetes_asyncio import config as k8s_config

MERGE_PATCH: Final = "application/merge-patch+json"


class ApiError(Exception):
    def __init__(self, status: int, body: str) -> None:
        super().__init__(f"{status}: {body[:300]}")
        self.status = status


def finish_lane(concurrency: int) -> int:
    """Finishes in flight. They stand for kubelets and job controllers, which report
    completions side by side with users' submissions, so their lane is twice the submitters'.
    At half of it (16) the large-scale run of 2026-11-25 12:16 finished work 78 s after its
    runtime on average: admitted work held quota that long, cohorts filled, and 2,989 of its
    3,004 evictions met a Finished patch already on its way (docs/design/bench.md)."""
    return max(4, 2 * concurrency)


class Api:
    def __init__(self, session: aiohttp.ClientSession, host: str, concurrency: int) -> None:
        self.session = session
        self.host = host.rstrip("/")
        self.slots = asyncio.Semaphore(concurrency)
        self.urgent_slots = asyncio.Semaphore(finish_lane(concurrency))
        """A lane of its own for finishes: a Finished patch queued behind thousands of pending
        creations would hold quota long after the runtime (the runner as the bottleneck)."""
        self.requests = 0
        """Requests sent (watches included): the runner's share of the API server's count."""

    @classmethod
    async def connect(cls, kubeconfig: str, concurrency: int = 32) -> Api:
        conf = k8s_client.Configuration()
        await k8s_config.load_kube_config(config_file=kubeconfig, client_configuration=conf)
        ctx = ssl.create_default_context(cafile=conf.ssl_ca_cert)
        if conf.cert_file:
            ctx.load_cert_chain(conf.cert_file, conf.key_file)
        headers = {"Accept": "application/json"}
        if conf.api_key.get("authorization"):
            headers["Authorization"] = conf.api_key["authorization"]
        connector = aiohttp.TCPConnector(ssl=ctx, limit=concurrency + finish_lane(concurrency) + 4)
        session = aiohttp.ClientSession(
            connector=connector, headers=headers, timeout=aiohttp.ClientTimeout(total=None)
        )
        return cls(session, str(conf.host), concurrency)

    async def close(self) -> None:
        await self.session.close()

    async def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        content_type: str = "application/json",
        params: dict[str, str] | None = None,
        urgent: bool = False,
    ) -> dict[str, Any]:
        data = None if body is None else json.dumps(body, separators=(",", ":"))
        async with self.urgent_slots if urgent else self.slots:
            self.requests += 1
            async with self.session.request(
                method,
                self.host + path,
                data=data,
                params=params,
                headers={"Content-Type": content_type},
                timeout=aiohttp.ClientTimeout(total=60),
            ) as resp:
                raw = await resp.read()
                if resp.status >= 300:
                    raise ApiError(resp.status, raw.decode(errors="replace"))
        decoded: dict[str, Any] = json.loads(raw) if raw else {}
        return decoded

    async def text(self, path: str) -> str:
        """A plain-text endpoint (the API server's /metrics); not counted as load."""
        async with self.session.get(self.host + path) as resp:
            body = await resp.text()
            if resp.status >= 300:
                raise ApiError(resp.status, body)
            return body

    async def watch(
        self, path: str, resource_version: str, params: dict[str, str] | None = None
    ) -> AsyncIterator[dict[str, Any]]:
        """The events of one watch from `resource_version`, until the server ends it."""
        self.requests += 1
        params = {
            **(params or {}),
            "watch": "1",
            "resourceVersion": resource_version,
            "allowWatchBookmarks": "true",
            "timeoutSeconds": "3600",
        }
        async with self.session.get(
            self.host + path, params=params, timeout=aiohttp.ClientTimeout(total=None)
        ) as resp:
            if resp.status >= 300:
                raise ApiError(resp.status, await resp.text())
            buffer = b""
            async for chunk in resp.content.iter_any():
                buffer += chunk
                *lines, buffer = buffer.split(b"\n")
                for line in lines:
                    if line:
                        yield json.loads(line)
