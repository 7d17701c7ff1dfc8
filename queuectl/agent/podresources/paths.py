"""Where the kubelet serves PodResources (no gRPC here, so the CLI can name it without grpcio)."""

from __future__ import annotations

from pathlib import Path
from typing import Final

DEFAULT_SOCKET: Final = Path("/var/lib/kubelet/pod-resources/kubelet.sock")
"""Under the kubelet's root directory (`--root-dir`, default /var/lib/kubelet)."""
