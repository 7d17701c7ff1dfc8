"""Wait for a component to answer its health endpoint, failing fast with the log's tail."""

from __future__ import annotations

import ssl
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path

from queuectl.testenv.errors import ComponentFailed, PortInUse
from queuectl.testenv.ports import mentions_port_conflict
from queuectl.testenv.process import ProcessRecord

Probe = Callable[[], bool]


def http_probe(url: str, context: ssl.SSLContext | None = None, expect: int = 200) -> Probe:
    """A probe that is True when GET `url` answers `expect`."""

    def probe() -> bool:
        try:
            with urllib.request.urlopen(url, timeout=2, context=context) as response:
                return bool(response.status == expect)
        except (urllib.error.URLError, OSError, ValueError):
            return False

    return probe


def client_tls(ca: Path, cert: Path | None = None, key: Path | None = None) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=str(ca))
    if cert is not None and key is not None:
        context.load_cert_chain(str(cert), str(key))
    return context


def insecure_tls() -> ssl.SSLContext:
    """For components that serve health checks with a self-signed certificate of their own."""
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    return context


def wait_ready(
    record: ProcessRecord,
    probe: Probe,
    *,
    timeout: float,
    what: str = "",
    interval: float = 0.2,
) -> float:
    """Poll until `probe` passes; raise at once if the process dies. Returns seconds waited."""
    what = what or record.name
    started = time.monotonic()
    deadline = started + timeout
    while True:
        if not record.alive():
            tail = record.log_tail()
            if mentions_port_conflict(tail):
                raise PortInUse(
                    f"{what} could not bind its port (another process took it)",
                    "run the command again (ports are picked afresh), or stop the process "
                    "using the port",
                    f"log: {record.log}\n{tail}",
                )
            raise ComponentFailed(
                f"{what} exited during start-up",
                f"read its log at {record.log}",
                tail,
            )
        if probe():
            return time.monotonic() - started
        if time.monotonic() > deadline:
            raise ComponentFailed(
                f"{what} was not ready after {timeout:.0f}s",
                f"read its log at {record.log}; a slow machine may need a longer timeout "
                "(QUEUECTL_TESTENV_TIMEOUT)",
                record.log_tail(),
            )
        time.sleep(interval)
