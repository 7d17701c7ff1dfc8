"""A server TLS context that follows its certificate files, so rotation needs no restart.

The listening socket keeps one base SSLContext whose SNI callback runs on every handshake (OpenSSL
calls it also when the client sends no server name, as the API server does for an IP URL). The
callback swaps the connection onto the newest context, rebuilt when the files' stat signature
changes. Existing connections keep their certificate; new ones get the new one. Files that fail
to load (half written) leave the previous context in place. With `client_ca` every context also
asks for a client certificate and verifies it against that CA (the visibility API's front
proxy); whether one was presented is the application's question.
"""

from __future__ import annotations

import logging
import os
import ssl
import time
from pathlib import Path

log = logging.getLogger(__name__)

CERT_FILE = "tls.crt"
KEY_FILE = "tls.key"

_Signature = tuple[tuple[int, int, int], ...]


def _signature(*paths: Path) -> _Signature:
    stats = [p.stat() for p in paths]
    return tuple((s.st_mtime_ns, s.st_size, s.st_ino) for s in stats)


def _load(cert: Path, key: Path, client_ca: bytes | None = None) -> ssl.SSLContext:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.load_cert_chain(cert, key)
    if client_ca is not None:
        ctx.load_verify_locations(cadata=client_ca.decode())
        ctx.verify_mode = ssl.CERT_OPTIONAL
    return ctx


class ReloadingTLS:
    """Holds the current server context for cert_dir/tls.crt + tls.key and reloads it on change."""

    def __init__(
        self,
        cert_dir: str | os.PathLike[str],
        min_check_interval: float = 1.0,
        client_ca: bytes | None = None,
    ) -> None:
        self.client_ca = client_ca
        self.cert = Path(cert_dir) / CERT_FILE
        self.key = Path(cert_dir) / KEY_FILE
        self.min_check_interval = min_check_interval
        self._signature = _signature(self.cert, self.key)
        self._current = _load(self.cert, self.key, client_ca)
        self._last_check = time.monotonic()
        self.reloads = 0
        self.base = _load(self.cert, self.key, client_ca)
        self.base.sni_callback = self._on_handshake

    @property
    def current(self) -> ssl.SSLContext:
        return self._current

    def reload_if_changed(self) -> bool:
        """Rebuild the context if the files changed since the last load; True if it did."""
        self._last_check = time.monotonic()
        try:
            signature = _signature(self.cert, self.key)
            if signature == self._signature:
                return False
            ctx = _load(self.cert, self.key, self.client_ca)
        except (OSError, ssl.SSLError) as exc:
            log.warning("keeping the current TLS certificate, new files do not load: %s", exc)
            return False
        self._current, self._signature = ctx, signature
        self.reloads += 1
        log.info("reloaded TLS certificate from %s", self.cert)
        return True

    def _on_handshake(
        self, conn: ssl.SSLObject | ssl.SSLSocket, server_name: str | None, _: ssl.SSLContext
    ) -> None:
        if time.monotonic() - self._last_check >= self.min_check_interval:
            self.reload_if_changed()
        conn.context = self._current
