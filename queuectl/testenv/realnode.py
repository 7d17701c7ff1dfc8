"""Real nodes beside the kwok ones: kubelet, containerd and a CNI bridge in a network namespace.

Each real node gets its own network namespace joined to the host by a veth pair (host end
`10.200.<k>.1/30`, node end `.2`), a pod subnet `10.244.<k>.0/24` on a `cni0` bridge inside
the namespace, and a host route to that subnet through the veth, so the API server reaches pod
IPs (webhooks, with `--enable-aggregator-routing`) and the kubelet reaches the API server at
the veth's host end. containerd and the kubelet enter only the network namespace (`nsenter
--net`), not a mount namespace, so the volumes the kubelet mounts are the ones containerd sees.
Images come from archives (`load_image`), never a registry; the sandbox image is our own
static pause binary. Everything a node leaves (processes of its pods, mounts, cgroups, the
namespace) is listed in `realnodes.json` and removed by `teardown`, also from another process.
Needs root (network namespaces, mounts, cgroups) and Linux.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
import signal
import subprocess
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from queuectl.testenv import nodeconfig
from queuectl.testenv.errors import ComponentFailed, ToolMissing
from queuectl.testenv.nodebuild import NodeBinaries
from queuectl.testenv.ociarchive import single_binary_image
from queuectl.testenv.pki import CertificateAuthority
from queuectl.testenv.readiness import http_probe
from queuectl.testenv.waiting import eventually

if TYPE_CHECKING:
    from queuectl.testenv.controlplane import ControlPlane

RECORD_FILE = "realnodes.json"
PAUSE_IMAGE = "localhost/queuectl/pause:v1"
CGROUP_ROOT = Path("/sys/fs/cgroup")
SHIM_SOCKETS = Path("/run/containerd/s")
_ROOT_HINT = (
    "real nodes need root on Linux (network namespaces, mounts, cgroups), iproute2 and "
    "nsenter; run as root or leave --real-nodes out"
)


@dataclass(frozen=True)
class RealNode:
    """Where one real node lives: its namespace, addresses, cgroup and directory."""

    name: str
    netns: str
    host_if: str
    node_if: str
    host_ip: str
    node_ip: str
    pod_cidr: str
    cgroup: str
    dir: str

    @property
    def containerd_socket(self) -> Path:
        return Path(self.dir) / "containerd" / "containerd.sock"

    @property
    def kubelet_root(self) -> Path:
        """The kubelet's `--root-dir` (its pod-resources socket lives under it)."""
        return Path(self.dir) / "kubelet" / "root"

    @property
    def pod_resources_socket(self) -> Path:
        return self.kubelet_root / "pod-resources" / "kubelet.sock"


def _run(*argv: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
    except FileNotFoundError as exc:
        raise ToolMissing(f"{argv[0]} was not found", _ROOT_HINT) from exc
    if check and done.returncode != 0:
        raise ComponentFailed(
            f"`{' '.join(argv)}` failed (exit code {done.returncode}): {done.stderr.strip()}",
            _ROOT_HINT,
        )
    return done


def _used_slots() -> set[int]:
    """Slots k whose 10.200.k.0 or 10.244.k.0 another environment already routes."""
    used: set[int] = set()
    for line in _run("ip", "-4", "route", "show").stdout.splitlines():
        parts = line.split()[0].split(".")
        if len(parts) == 4 and parts[0] == "10" and parts[1] in ("200", "244"):
            used.add(int(parts[2]))
    return used


def plan(work_dir: Path, count: int, name_prefix: str = "real") -> list[RealNode]:
    """Names and addresses for `count` nodes that no other environment on this host uses."""
    if os.geteuid() != 0:
        raise ComponentFailed("real nodes need root", _ROOT_HINT)
    token = hashlib.sha256(str(work_dir.resolve()).encode()).hexdigest()[:6]
    free = [k for k in range(1, 255) if k not in _used_slots()]
    if len(free) < count:
        raise ComponentFailed(
            f"no free 10.200.k.0/30 + 10.244.k.0/24 slot for {count} real nodes",
            "stop other environments with real nodes (`queuectl dev down`)",
        )
    return [
        RealNode(
            name=f"{name_prefix}-{i}",
            netns=f"qctl-{token}-{i}",
            host_if=f"qh{token}{i}",
            node_if=f"qn{token}{i}",
            host_ip=f"10.200.{k}.1",
            node_ip=f"10.200.{k}.2",
            pod_cidr=f"10.244.{k}.0/24",
            cgroup=f"queuectl-{token}-{i}",
            dir=str(work_dir / "nodes" / f"{name_prefix}-{i}"),
        )
        for i, k in enumerate(free[:count])
    ]


def _record(work_dir: Path, nodes: list[RealNode]) -> None:
    (work_dir / RECORD_FILE).write_text(json.dumps([asdict(n) for n in nodes], indent=2))


def recorded(work_dir: Path) -> list[RealNode]:
    path = work_dir / RECORD_FILE
    return [RealNode(**n) for n in json.loads(path.read_text())] if path.exists() else []


def _cgroup_dirs(node: RealNode) -> list[Path]:
    """The node's cgroup in every mounted hierarchy (cgroup v1 controllers, or v2 alone)."""
    if (CGROUP_ROOT / "cgroup.controllers").exists():
        return [CGROUP_ROOT / node.cgroup]
    return [d / node.cgroup for d in sorted(CGROUP_ROOT.iterdir()) if (d / "cgroup.procs").exists()]


def _make_cgroups(node: RealNode) -> None:
    for d in _cgroup_dirs(node):
        d.mkdir(exist_ok=True)
        for knob in ("cpuset.cpus", "cpuset.mems"):  # v1 cpuset children start empty
            if (d / knob).exists() and not (d / knob).read_text().strip():
                (d / knob).write_text((d.parent / knob).read_text())


def _network_up(node: RealNode) -> None:
    ns = ("ip", "netns", "exec", node.netns)
    _run("ip", "netns", "add", node.netns)
    _run("ip", "link", "add", node.host_if, "type", "veth", "peer", "name", node.node_if)
    _run("ip", "link", "set", node.node_if, "netns", node.netns)
    _run("ip", "addr", "add", f"{node.host_ip}/30", "dev", node.host_if)
    _run("ip", "link", "set", node.host_if, "up")
    _run(*ns, "ip", "addr", "add", f"{node.node_ip}/30", "dev", node.node_if)
    _run(*ns, "ip", "link", "set", node.node_if, "up")
    _run(*ns, "ip", "link", "set", "lo", "up")
    _run(*ns, "ip", "route", "add", "default", "via", node.host_ip)
    _run(*ns, "sysctl", "-qw", "net.ipv4.ip_forward=1")
    _run("ip", "route", "add", node.pod_cidr, "via", node.node_ip)


def prepare(plane: ControlPlane, count: int) -> list[RealNode]:
    """Before the control plane starts: create the namespaces, so the API server can be told
    the address nodes reach it at. Recorded first, so a failure half way is still torn down."""
    nodes = plan(plane.work_dir, count)
    plane.work_dir.mkdir(parents=True, exist_ok=True)
    _record(plane.work_dir, nodes)
    for node in nodes:
        # Names derive from the work dir: a namespace by this name is a crashed run's of this
        # same environment whose record was wiped; remove it rather than fail on "File exists".
        _remove(node)
        _network_up(node)
        _make_cgroups(node)
    plane.node_gateway = nodes[0].host_ip
    return nodes


def _ctr(node: RealNode, *args: str) -> subprocess.CompletedProcess[str]:
    return _run("ctr", "--address", str(node.containerd_socket), "--namespace", "k8s.io", *args)


def load_image(node: RealNode, archive: Path, base_name: str | None = None) -> None:
    """Import an OCI or Docker image archive into the node's containerd (what a pull would do).

    An OCI layout whose refs are bare tags (`make image` writes `0.1.0`) needs `base_name`
    (e.g. `localhost/queuectl/queuectl` gives `localhost/queuectl/queuectl:0.1.0`).
    """
    if not archive.is_file():
        raise ComponentFailed(
            f"image archive {archive} does not exist",
            "pass a tar of an OCI layout or a `docker save` archive "
            "(e.g. `tar -C build/image/oci -cf image.tar .`)",
        )
    named = ["--base-name", base_name] if base_name else []
    _ctr(node, "images", "import", *named, str(archive))


def start(plane: ControlPlane, nodes: list[RealNode], binaries: NodeBinaries) -> None:
    """After the control plane: start containerd and the kubelet of each node; wait for Ready."""
    ca = CertificateAuthority.load(plane.layout.cert("ca"), plane.layout.key("ca"))
    plane.kubectl("apply", "-f", "-", input=nodeconfig.NODE_RBAC)
    assert plane.ports is not None and plane.node_gateway is not None, "prepare() first"
    server = f"https://{plane.node_gateway}:{plane.ports.apiserver}"
    pause_archive = plane.work_dir / "images" / "pause.tar"
    single_binary_image(binaries.path("pause"), PAUSE_IMAGE, "/pause", pause_archive)
    for node in nodes:
        files = nodeconfig.write(node, binaries, ca, server, PAUSE_IMAGE)
        enter = ["nsenter", f"--net=/run/netns/{node.netns}"]
        socket = node.containerd_socket
        plane.start_process(
            f"containerd-{node.name}",
            [*enter, str(binaries.containerd), "--config", str(files.containerd_config)],
            ready=socket.exists,
        )
        load_image(node, pause_archive)
        plane.start_process(
            f"kubelet-{node.name}",
            [*enter, str(binaries.path("kubelet")), *files.kubelet_flags],
            ready=http_probe(f"http://{node.node_ip}:10248/healthz"),
            timeout=max(plane.timeout, 120.0),
        )
        plane.start_process(
            f"kube-proxy-{node.name}",
            [*enter, str(binaries.path("kube-proxy")), *files.kube_proxy_flags],
            ready=http_probe(f"http://{node.node_ip}:10256/healthz"),
        )
    for node in nodes:
        eventually(
            functools.partial(_node_ready, plane, node.name),
            timeout=max(plane.timeout, 120.0),
            what=f"real node {node.name} Ready (kubelet log: logs/kubelet-{node.name}.log)",
        )


def _node_ready(plane: ControlPlane, name: str) -> bool:
    done = plane.kubectl(
        "get",
        "node",
        name,
        "-o",
        'jsonpath={.status.conditions[?(@.type=="Ready")].status}',
        check=False,
    )
    return done.stdout.strip() == "True"


def _pids_in(node: RealNode) -> set[int]:
    """Processes a node leaves behind: its pods' (in its cgroup) and containerd shims (in its
    network namespace)."""
    pids: set[int] = set()
    for d in _cgroup_dirs(node):
        for procs in d.rglob("cgroup.procs") if d.exists() else ():
            pids.update(int(p) for p in procs.read_text().split())
    done = _run("ip", "netns", "pids", node.netns, check=False)
    pids.update(int(p) for p in done.stdout.split())
    pids.discard(os.getpid())
    return pids


def _remove_shim_sockets(node: RealNode) -> None:
    """containerd 1.6 puts each shim's socket in /run/containerd/s/, named by the sha256 of
    `<containerd address>/<namespace>/<sandbox id>`; a killed shim leaves it there."""
    state = Path(node.dir) / "runc" / "k8s.io"
    for entry in state.iterdir() if state.is_dir() else ():
        key = f"{node.containerd_socket}/k8s.io/{entry.name}"
        (SHIM_SOCKETS / hashlib.sha256(key.encode()).hexdigest()).unlink(missing_ok=True)


def _unmount_under(directory: str) -> None:
    mounts = [line.split()[1] for line in Path("/proc/self/mounts").read_text().splitlines()]
    for target in sorted((m for m in mounts if m.startswith(directory + "/")), reverse=True):
        _run("umount", "-l", target, check=False)


def _remove(node: RealNode) -> None:
    for _ in range(3):
        pids = _pids_in(node)
        if not pids:
            break
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.5)
    _remove_shim_sockets(node)
    _unmount_under(node.dir)
    _run("ip", "netns", "delete", node.netns, check=False)
    _run("ip", "link", "delete", node.host_if, check=False)
    _run("ip", "route", "delete", node.pod_cidr, check=False)
    for d in _cgroup_dirs(node):
        for sub in sorted((p for p in d.rglob("*") if p.is_dir()), reverse=True):
            sub.rmdir()
        if d.exists():
            d.rmdir()


def teardown(work_dir: Path) -> list[str]:
    """Remove what the recorded nodes left: pod processes, mounts, namespaces, cgroups, routes.

    Runs after the supervisor stopped containerd and the kubelets; safe to run twice.
    """
    nodes = recorded(work_dir)
    for node in nodes:
        _remove(node)
    (work_dir / RECORD_FILE).unlink(missing_ok=True)
    return [n.name for n in nodes]
