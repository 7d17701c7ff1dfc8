"""Keeps the webhook certificates in a Secret, on disk for the server, and in the caBundles.

Every controller replica runs one; they agree through the Secret (create conflicts and
resourceVersion conflicts make the loser re-read and adopt the winner's). Order within a round:
store the Secret, publish its CA bundle to the webhook configurations, then write the files the
server reloads. Each replica publishes before it serves, so the API server trusts a certificate
before any replica serves it, and a losing replica never publishes a bundle nobody serves.
"""

from __future__ import annotations

import asyncio
import base64
import logging
import os
import tempfile
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from queuectl.api import names
from queuectl.api.errors import is_transient
from queuectl.webhooks.certs import (
    LOCAL_IPS,
    CertPair,
    CertState,
    plan_certificates,
    service_dns_names,
)
from queuectl.webhooks.tls import CERT_FILE, KEY_FILE

log = logging.getLogger(__name__)

CA_CERT_KEY, CA_KEY_KEY, PREVIOUS_CA_KEY = "ca.crt", "ca.key", "previous-ca.crt"


def state_to_data(state: CertState) -> dict[str, str]:
    """Secret `data` (base64 values) for a certificate state."""
    raw = {
        CA_CERT_KEY: state.ca.cert_pem,
        CA_KEY_KEY: state.ca.key_pem,
        CERT_FILE: state.serving.cert_pem,
        KEY_FILE: state.serving.key_pem,
    }
    if state.previous_ca_pem:
        raw[PREVIOUS_CA_KEY] = state.previous_ca_pem
    return {k: base64.b64encode(v).decode() for k, v in raw.items()}


def state_from_data(data: Mapping[str, str] | None) -> CertState | None:
    """The certificate state in a Secret's `data`, or None when it holds none (or a partial one)."""
    if not data or not all(k in data for k in (CA_CERT_KEY, CA_KEY_KEY, CERT_FILE, KEY_FILE)):
        return None
    raw = {k: base64.b64decode(v) for k, v in data.items()}
    return CertState(
        ca=CertPair(raw[CA_CERT_KEY], raw[CA_KEY_KEY]),
        serving=CertPair(raw[CERT_FILE], raw[KEY_FILE]),
        previous_ca_pem=raw.get(PREVIOUS_CA_KEY) or None,
    )


def write_files(cert_dir: str | os.PathLike[str], state: CertState) -> bool:
    """Write tls.key, tls.crt and ca.crt atomically (key first); True if anything changed."""
    directory = Path(cert_dir)
    directory.mkdir(parents=True, exist_ok=True)
    wanted = [
        (KEY_FILE, state.serving.key_pem),
        (CERT_FILE, state.serving.cert_pem),
        (CA_CERT_KEY, state.ca_bundle()),
    ]
    changed = False
    for name, content in wanted:
        path = directory / name
        if path.exists() and path.read_bytes() == content:
            continue
        fd, tmp = tempfile.mkstemp(dir=directory, prefix=f".{name}.")
        with os.fdopen(fd, "wb") as handle:
            handle.write(content)
        os.chmod(tmp, 0o600)
        os.replace(tmp, path)
        changed = True
    return changed


class CertManager:
    """One round (`ensure`) or a loop (`run`) of keeping certificates current."""

    def __init__(
        self,
        api: client.ApiClient,
        cert_dir: str | os.PathLike[str],
        namespace: str = names.SYSTEM_NAMESPACE,
        secret_name: str = names.WEBHOOK_CERT_SECRET,
        dns_names: Sequence[str] | None = None,
        ip_addresses: Sequence[str] = LOCAL_IPS,
        mutating_configurations: Sequence[str] = (names.MUTATING_WEBHOOK_CONFIGURATION,),
        validating_configurations: Sequence[str] = (names.VALIDATING_WEBHOOK_CONFIGURATION,),
        api_services: Sequence[str] = (names.VISIBILITY_API_SERVICE,),
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self.core = client.CoreV1Api(api)
        self.admission = client.AdmissionregistrationV1Api(api)
        self.registration = client.ApiregistrationV1Api(api)
        self.cert_dir = cert_dir
        self.namespace = namespace
        self.secret_name = secret_name
        self.dns_names = list(dns_names or service_dns_names(names.WEBHOOK_SERVICE, namespace))
        self.ip_addresses = list(ip_addresses)
        self.mutating = list(mutating_configurations)
        self.validating = list(validating_configurations)
        self.api_services = list(api_services)
        self.clock = clock

    async def ensure(self) -> CertState:
        """Bring Secret, files and caBundles in line; returns the state now in force."""
        for _ in range(5):
            secret = await self._read_secret()
            current = state_from_data(secret.data if secret else None)
            state, reasons = plan_certificates(
                current, self.clock(), self.dns_names, self.ip_addresses
            )
            if reasons:
                log.info("webhook certificates change: %s", "; ".join(reasons))
                if not await self._store(secret, state):
                    continue  # another replica wrote first: adopt theirs
            # Every replica publishes the stored bundle before serving the stored certificate.
            await self.patch_ca_bundles(state.ca_bundle())
            write_files(self.cert_dir, state)
            return state
        raise RuntimeError(f"could not settle Secret {self.namespace}/{self.secret_name}")

    async def run(self, interval_seconds: float = 600.0, retry_seconds: float = 10.0) -> None:
        """Call ensure() forever. A failed round is logged and tried again after
        `retry_seconds`: nothing (a dropped connection, an API server restart, a bug) may end
        this loop, since certificates that stop rotating fail every webhook call later."""
        while True:
            delay = interval_seconds
            try:
                await self.ensure()
            except Exception as exc:
                if is_transient(exc) or isinstance(exc, ApiException | RuntimeError):
                    log.warning("webhook certificate round: %s: %s", type(exc).__name__, exc)
                else:
                    log.exception("webhook certificate round failed")
                delay = min(interval_seconds, retry_seconds)
            await asyncio.sleep(delay)

    async def _read_secret(self) -> client.V1Secret | None:
        try:
            secret: client.V1Secret = await self.core.read_namespaced_secret(
                self.secret_name, self.namespace
            )
            return secret
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise

    async def _store(self, secret: client.V1Secret | None, state: CertState) -> bool:
        """Create or replace the Secret; False on a conflict with another writer."""
        body = client.V1Secret(
            metadata=client.V1ObjectMeta(
                name=self.secret_name,
                namespace=self.namespace,
                labels={"app.kubernetes.io/name": "queuectl"},
                resource_version=secret.metadata.resource_version if secret else None,
            ),
            type="Opaque",
            data=state_to_data(state),
        )
        try:
            if secret is None:
                await self.core.create_namespaced_secret(self.namespace, body)
            else:
                await self.core.replace_namespaced_secret(self.secret_name, self.namespace, body)
        except ApiException as exc:
            if exc.status == 409:
                return False
            raise
        return True

    async def patch_ca_bundles(self, bundle: bytes) -> None:
        """Set caBundle on every webhook of the named configurations (missing ones are skipped)."""
        encoded = base64.b64encode(bundle).decode()
        for name in self.mutating:
            await self._patch(name, encoded, mutating=True)
        for name in self.validating:
            await self._patch(name, encoded, mutating=False)
        for name in self.api_services:
            await self._patch_api_service(name, encoded)

    async def _patch_api_service(self, name: str, encoded: str) -> None:
        """The visibility APIService is served with the same certificate (through the webhook
        Service), so it trusts the same bundle."""
        try:
            current = await self.registration.read_api_service(name)
        except ApiException as exc:
            if exc.status == 404:
                log.info("APIService %s not found; caBundle not injected", name)
                return
            raise
        if current.spec.ca_bundle == encoded:
            return
        await self.registration.patch_api_service(name, {"spec": {"caBundle": encoded}})
        log.info("injected the CA bundle into APIService %s", name)

    async def _patch(self, name: str, encoded: str, mutating: bool) -> None:
        read = (
            self.admission.read_mutating_webhook_configuration
            if mutating
            else self.admission.read_validating_webhook_configuration
        )
        patch = (
            self.admission.patch_mutating_webhook_configuration
            if mutating
            else self.admission.patch_validating_webhook_configuration
        )
        for attempt in range(3):
            try:
                config = await read(name)
            except ApiException as exc:
                if exc.status == 404:
                    log.info("webhook configuration %s not found; caBundle not injected", name)
                    return
                raise
            ops = _ca_bundle_ops(config.webhooks or [], encoded)
            if not ops:
                return
            try:
                await patch(name, ops)
            except ApiException as exc:
                # 409/422: the configuration changed between read and patch (the test op failed)
                if exc.status in (409, 422) and attempt < 2:
                    continue
                raise
            log.info("injected the CA bundle into %s", name)
            return


def _ca_bundle_ops(webhooks: list[Any], encoded: str) -> list[dict[str, Any]]:
    """JSONPatch setting caBundle where it differs, each guarded by a test of the webhook's name."""
    ops: list[dict[str, Any]] = []
    for index, webhook in enumerate(webhooks):
        if webhook.client_config.ca_bundle == encoded:
            continue
        ops.append({"op": "test", "path": f"/webhooks/{index}/name", "value": webhook.name})
        ops.append(
            {"op": "add", "path": f"/webhooks/{index}/clientConfig/caBundle", "value": encoded}
        )
    return ops
