"""Build the real-node programs (kubelet, kube-proxy, CNI plugins, pause) into their own cache.

A second Go module (`gonode/`, the same Kubernetes release and replace lines as `gobuild/`
plus github.com/containernetworking/plugins) so the control-plane cache key never changes
when real nodes are added; Go's build cache shares every package the two have in common, so
this build costs ~3 min on 2 cores after the control plane's. containerd, runc and ctr come
from the host (Debian packages `containerd`, `runc`).
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path

from queuectl.testenv.build import (
    Progress,
    _run_streaming,
    build_once,
    check_go,
    find_go,
    ldflags,
)
from queuectl.testenv.debian import ensure_tools
from queuectl.testenv.versions import gobuild_dir, pinned

CNI_PLUGINS = ("bridge", "host-local", "loopback", "portmap")
NODE_PROGRAMS = ("kubelet", "kube-proxy", "pause", *CNI_PLUGINS)
_CNI = "github.com/containernetworking/plugins/plugins"
GO_PACKAGES = (
    "k8s.io/kubernetes/cmd/kubelet",
    "k8s.io/kubernetes/cmd/kube-proxy",
    f"{_CNI}/main/bridge",
    f"{_CNI}/ipam/host-local",
    f"{_CNI}/main/loopback",
    f"{_CNI}/meta/portmap",
    "./pause",
)
# Each host program and the Debian package that ships it.
HOST_TOOLS = {
    "containerd": "containerd",
    "containerd-shim-runc-v2": "containerd",
    "ctr": "containerd",
    "runc": "runc",
    "iptables": "iptables",  # kube-proxy
    "conntrack": "conntrack",  # kube-proxy's stale-UDP cleanup
    "nsenter": "util-linux",
    "ip": "iproute2",
}


def gonode_dir() -> Path:
    return gobuild_dir().parent / "gonode"


@dataclass(frozen=True)
class NodeBinaries:
    dir: Path
    containerd: Path

    def path(self, name: str) -> Path:
        return self.dir / name


def cache_key() -> str:
    v = pinned()
    digest = hashlib.sha256()
    for name in ("go.mod", "go.sum", "tools.go", "pause/main.go"):
        digest.update((gonode_dir() / name).read_bytes())
    digest.update(f"ldflags={ldflags(v)};cgo=0".encode())
    return f"node-{v.kubernetes}-{digest.hexdigest()[:12]}"


def host_tools(progress: Progress = print) -> dict[str, Path]:
    """containerd and friends from the host's Debian packages, installed when missing (as
    deploy/image/build.sh does: root with apt-get, e.g. a fresh CI machine); else one clear
    error naming the packages."""
    return ensure_tools(HOST_TOOLS, "real nodes", progress)


def ensure_node_binaries(progress: Progress = print, *, root: Path | None = None) -> NodeBinaries:
    """Return cached real-node programs for the pinned Kubernetes, building them the first time."""
    containerd = host_tools(progress)["containerd"]
    v = pinned()

    def make(staging: Path, log: Path) -> dict[str, object]:
        go = check_go(find_go(), v.go)
        argv = [str(go), "build", "-v", "-trimpath", "-ldflags", ldflags(v), "-o", f"{staging}/"]
        _run_streaming(
            [*argv, *GO_PACKAGES],
            cwd=gonode_dir(),
            env=dict(os.environ, CGO_ENABLED="0"),
            log=log,
            what=f"go build (kubelet {v.kubernetes})",
            progress=progress,
        )
        return {"kubernetes": v.kubernetes}

    final = build_once(
        cache_key(),
        make,
        announce=f"Building kubelet, kube-proxy and CNI plugins {v.kubernetes}.",
        what="the real-node programs",
        progress=progress,
        root=root,
    )
    return NodeBinaries(final, containerd)
