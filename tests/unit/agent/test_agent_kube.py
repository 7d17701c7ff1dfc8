"""The Node client reads raw responses, so it must check their status itself: a refused write is
never mistaken for a Node (found against the real API server: a 409 body read as an empty Node)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from kubernetes_asyncio import client as k8s
from kubernetes_asyncio.client.exceptions import ApiException

from queuectl.agent.kube import Conflict, KubeNodeClient


class Raw:
    def __init__(self, status: int, body: dict[str, Any]) -> None:
        self.status = status
        self._body = json.dumps(body).encode()

    async def read(self) -> bytes:
        return self._body


async def answer(raw: Raw) -> Raw:
    return raw


async def test_a_2xx_body_is_the_node() -> None:
    client = KubeNodeClient(k8s.ApiClient())
    data = await client._raw(answer(Raw(200, {"metadata": {"name": "n"}})))
    assert data["metadata"]["name"] == "n"


async def test_a_409_is_a_conflict() -> None:
    client = KubeNodeClient(k8s.ApiClient())
    with pytest.raises(Conflict):
        await client._raw(answer(Raw(409, {"kind": "Status", "reason": "Conflict"})))


async def test_other_errors_raise() -> None:
    client = KubeNodeClient(k8s.ApiClient())
    with pytest.raises(ApiException):
        await client._raw(answer(Raw(403, {"kind": "Status", "reason": "Forbidden"})))
