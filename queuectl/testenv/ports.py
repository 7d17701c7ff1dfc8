"""Ports on 127.0.0.1: pick free ones, and refuse a taken one with a clear error."""

from __future__ import annotations

import contextlib
import socket

from queuectl.testenv.errors import PortInUse

HOST = "127.0.0.1"


def port_is_free(port: int, host: str = HOST) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind((host, port))
        except OSError:
            return False
    return True


def free_ports(count: int, host: str = HOST) -> list[int]:
    """`count` distinct ports the kernel says are free now (held open together while chosen)."""
    with contextlib.ExitStack() as stack:
        ports = []
        for _ in range(count):
            sock = stack.enter_context(socket.socket(socket.AF_INET, socket.SOCK_STREAM))
            sock.bind((host, 0))
            ports.append(int(sock.getsockname()[1]))
        return ports


def require_free(port: int, what: str, flag: str) -> None:
    """Raise PortInUse naming the component, the port and the option that changes it."""
    if not port_is_free(port):
        raise PortInUse(
            f"port {port} on {HOST}, asked for the {what}, is already in use",
            f"stop whatever listens there (e.g. `ss -ltnp 'sport = :{port}'`), pass another "
            f"port with {flag}, or leave {flag} out to pick a free port",
        )


LOG_PORT_MARKERS = ("address already in use", "bind: address in use")


def mentions_port_conflict(log_text: str) -> bool:
    lowered = log_text.lower()
    return any(marker in lowered for marker in LOG_PORT_MARKERS)
