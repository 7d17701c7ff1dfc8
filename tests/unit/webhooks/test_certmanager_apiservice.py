"""The CertManager publishes its CA bundle to the visibility APIService too (served with the
same certificate through the webhook Service), only when it differs, and goes on without one."""

from __future__ import annotations

import base64
from types import SimpleNamespace
from typing import Any

import pytest
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from queuectl.api import names
from queuectl.webhooks.certmanager import CertManager


class Registration:
    def __init__(self, bundle: str | None) -> None:
        self.bundle = bundle
        self.patches: list[tuple[str, Any]] = []

    async def read_api_service(self, name: str) -> Any:
        if self.bundle is None:
            raise ApiException(status=404, reason="Not Found")
        return SimpleNamespace(spec=SimpleNamespace(ca_bundle=self.bundle))

    async def patch_api_service(self, name: str, body: Any) -> None:
        self.patches.append((name, body))


@pytest.mark.parametrize(
    ("current", "patched"),
    [
        pytest.param(None, False, id="no APIService: nothing to inject"),
        pytest.param("b2xk", True, id="an old bundle is replaced"),
        pytest.param(base64.b64encode(b"CA").decode(), False, id="the same bundle is left"),
    ],
)
async def test_the_visibility_api_service_trusts_the_webhook_ca(
    tmp_path: object, current: str | None, patched: bool
) -> None:
    api = client.ApiClient(client.Configuration())
    try:
        certs = CertManager(
            api, str(tmp_path), mutating_configurations=(), validating_configurations=()
        )
        registration = Registration(current)
        certs.registration = registration  # type: ignore[assignment]
        await certs.patch_ca_bundles(b"CA")
        expected = [(names.VISIBILITY_API_SERVICE, {"spec": {"caBundle": "Q0E="}})]
        assert registration.patches == (expected if patched else [])
    finally:
        await api.close()
