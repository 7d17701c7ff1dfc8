"""Where the device plugin's sockets live (no gRPC here, so the CLI can check flags without it)."""

from __future__ import annotations

from pathlib import Path

DEFAULT_DIR = Path("/var/lib/kubelet/device-plugins")  # the kubelet's, fixed (no flag moves it)
KUBELET_SOCKET = "kubelet.sock"
ENDPOINT = "queuectl-gpu.sock"
# sockaddr_un.sun_path is 108 bytes with its terminating NUL.
MAX_SOCKET_PATH = 107


class PluginSocketError(ValueError):
    """A socket path the kernel cannot bind; the message says what to shorten."""


def check_socket_path(path: Path) -> Path:
    if len(str(path).encode()) > MAX_SOCKET_PATH:
        raise PluginSocketError(
            f"socket path {path} is {len(str(path).encode())} bytes; a unix socket path may "
            f"have at most {MAX_SOCKET_PATH}: use a shorter --device-plugin-dir"
        )
    return path
