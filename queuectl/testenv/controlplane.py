"""A real local Kubernetes control plane: etcd, kube-apiserver, controller-manager, scheduler, kwok.

Start order follows the dependencies: etcd, then the API server (wait for /readyz), then the
controllers and kwok, each waited on through its health endpoint. Every process is recorded in
the work dir (see process.Supervisor), so `ControlPlane.attach(work_dir).stop()` from another
process stops exactly what was started. `start_process` is the hook for more processes (the
queuectl controller, webhooks): one call, same logging, readiness and shutdown.
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict
from pathlib import Path
from types import TracebackType

from queuectl.testenv import components as comp
from queuectl.testenv import realnode
from queuectl.testenv.build import Binaries, ensure_binaries
from queuectl.testenv.cluster import Cluster
from queuectl.testenv.errors import ComponentFailed
from queuectl.testenv.kubeconfig import write_kubeconfig
from queuectl.testenv.nodebuild import ensure_node_binaries
from queuectl.testenv.pki import CertificateAuthority, service_account_key
from queuectl.testenv.ports import free_ports, require_free
from queuectl.testenv.process import ProcessRecord, Supervisor
from queuectl.testenv.readiness import Probe, client_tls, http_probe, insecure_tls, wait_ready
from queuectl.testenv.versions import pinned

STATE_FILE = "state.json"
Progress = Callable[[str], None]


def _quiet(_: str) -> None:
    return None


def default_timeout() -> float:
    return float(os.environ.get("QUEUECTL_TESTENV_TIMEOUT", "60"))


class ControlPlane(Cluster):
    """One local control plane in `work_dir` (a fresh temporary directory when omitted)."""

    def __init__(
        self,
        work_dir: str | Path | None = None,
        *,
        name: str = "queuectl",
        apiserver_port: int | None = None,
        timeout: float | None = None,
        progress: Progress = _quiet,
        binaries: Binaries | None = None,
        real_nodes: int = 0,
        node_lease_seconds: int = comp.NODE_LEASE_SECONDS,
    ) -> None:
        """`node_lease_seconds`: the fake nodes' Lease duration (kwok renews each every quarter
        of it); a benchmark with hundreds of nodes lengthens it so that their heartbeats do not
        load the API server under test (the controller-manager's grace period follows)."""
        self.work_dir = Path(work_dir or tempfile.mkdtemp(prefix="queuectl-testenv-"))
        super().__init__(self.work_dir / "kubeconfig")
        self.name = name
        self.apiserver_port = apiserver_port
        self.timeout = timeout if timeout is not None else default_timeout()
        self.progress = progress
        self.binaries = binaries
        self.layout = comp.Layout(self.work_dir)
        self.supervisor = Supervisor(self.work_dir)
        self.ports: comp.Ports | None = None
        self.start_seconds: float | None = None
        self.real_nodes = real_nodes
        self.node_lease_seconds = node_lease_seconds
        # Set by realnode.prepare(): the host address real nodes reach the API server at.
        self.node_gateway: str | None = None
        self._probes: dict[str, Probe | None] = {}

    # ---- lifecycle -------------------------------------------------------------------------
    @property
    def server(self) -> str:
        assert self.ports is not None, "not started"
        return f"https://127.0.0.1:{self.ports.apiserver}"

    def start(self) -> ControlPlane:
        """Build if needed, then start every component; on any failure stop what started."""
        if self.apiserver_port is not None:
            require_free(self.apiserver_port, "API server", "--apiserver-port")
        if self.supervisor.records:
            raise ComponentFailed(
                f"{self.work_dir} already holds a started environment",
                "stop it first (`queuectl dev down`) or use another work dir",
            )
        binaries = self.binaries or ensure_binaries(self.progress)
        node_binaries = ensure_node_binaries(self.progress) if self.real_nodes else None
        started = time.monotonic()
        try:
            nodes = realnode.prepare(self, self.real_nodes) if self.real_nodes else []
            self._start(binaries)
            if node_binaries is not None:
                self.progress(f"Starting {len(nodes)} real node(s) (kubelet + containerd)")
                realnode.start(self, nodes, node_binaries)
        except BaseException:
            self.supervisor.stop_all()
            realnode.teardown(self.work_dir)
            raise
        self.start_seconds = time.monotonic() - started
        self._save_state()
        return self

    def _start(self, b: Binaries) -> None:
        lay = self.layout
        self.work_dir.mkdir(parents=True, exist_ok=True)
        chosen = free_ports(6)
        if self.apiserver_port is not None:
            chosen[2] = self.apiserver_port
        self.ports = p = comp.Ports(*chosen)
        self._write_pki_and_kubeconfigs()
        lay.scheduler_config.write_text(comp.scheduler_config(lay))
        self.progress(f"Starting the control plane in {self.work_dir}")
        self.start_process(
            "etcd",
            comp.etcd_argv(b, lay, p),
            ready=http_probe(f"http://127.0.0.1:{p.etcd_client}/health"),
        )
        admin_tls = client_tls(lay.cert("ca"), lay.cert("admin"), lay.key("admin"))
        self.start_process(
            "kube-apiserver",
            comp.apiserver_argv(b, lay, p, node_gateway=self.node_gateway),
            ready=http_probe(f"{self.server}/readyz", admin_tls),
        )
        insecure = insecure_tls()  # these two serve health on a self-signed cert of their own
        self.start_process(
            "kube-controller-manager",
            comp.controller_manager_argv(b, lay, p, self.node_lease_seconds),
            ready=http_probe(f"https://127.0.0.1:{p.controller_manager}/healthz", insecure),
        )
        self.start_process(
            "kube-scheduler",
            comp.scheduler_argv(b, lay, p),
            ready=http_probe(f"https://127.0.0.1:{p.scheduler}/healthz", insecure),
        )
        self.start_process(
            "kwok",
            comp.kwok_argv(b, lay, p, self.node_lease_seconds),
            ready=http_probe(f"http://127.0.0.1:{p.kwok}/healthz"),
        )
        # The controller-manager's service-account controller must be working before any pod.
        self.wait_for_service_account("default", timeout=self.timeout)

    def _write_pki_and_kubeconfigs(self) -> None:
        lay = self.layout
        ca = CertificateAuthority.create(f"{self.name}-ca")
        ca.as_pair().write(lay.pki, "ca")
        dns = ("localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc")
        ips: tuple[str, ...] = ("127.0.0.1",)
        if self.node_gateway is not None:  # reached by real nodes and, in pods, as the Service
            ips += (self.node_gateway, comp.KUBERNETES_SERVICE_IP)
        ca.issue_server("kube-apiserver", ips=ips, dns=dns).write(lay.pki, "apiserver")
        service_account_key().write(lay.pki, "sa")
        # A CA of its own for the front proxy: a client certificate from the cluster CA must
        # not pass for the aggregator's.
        proxy_ca = CertificateAuthority.create(f"{self.name}-front-proxy-ca")
        proxy_ca.as_pair().write(lay.pki, "front-proxy-ca")
        proxy_ca.issue_client(comp.FRONT_PROXY_CLIENT).write(lay.pki, "front-proxy-client")
        for component, (user, groups) in _IDENTITIES.items():
            pair = ca.issue_client(user, groups)
            pair.write(lay.pki, component)
            write_kubeconfig(lay.kubeconfig(component), self.server, ca.cert_pem, pair, self.name)

    def start_process(
        self,
        name: str,
        argv: Sequence[str],
        *,
        ready: Probe | None = None,
        env: Mapping[str, str] | None = None,
        timeout: float | None = None,
    ) -> ProcessRecord:
        """Start one more supervised process and wait until `ready` passes (if given).

        Its log goes to logs/<name>.log; `stop()` (and `queuectl dev down`) stops it with the rest.
        """
        started = time.monotonic()
        record = self.supervisor.spawn(name, argv, env=env)
        self._probes[name] = ready
        if ready is not None:
            wait_ready(record, ready, timeout=timeout or self.timeout, what=name)
        self.progress(f"  {name} ready in {time.monotonic() - started:.1f}s (pid {record.pid})")
        return record

    def restart_process(self, name: str, *, kill: bool = False) -> ProcessRecord:
        """Restart one component in place (same argv, ports, data) and wait until it is ready.

        Fault tests use it to restart kube-apiserver under a running controller; `kill=True`
        makes it a crash (SIGKILL) rather than a clean stop.
        """
        if name not in self._probes:
            raise ValueError(f"{name!r} was not started by this ControlPlane object")
        started = time.monotonic()
        record = self.supervisor.restart(name, kill=kill)
        probe = self._probes[name]
        if probe is not None:
            wait_ready(record, probe, timeout=self.timeout, what=name)
        self.progress(f"  {name} restarted in {time.monotonic() - started:.1f}s (pid {record.pid})")
        return record

    def stop_process(self, name: str) -> None:
        """Stop one component and leave it stopped (a real node's kubelet, to fail its node);
        `restart_process` starts it again."""
        if name not in self._probes:
            raise ValueError(f"{name!r} was not started by this ControlPlane object")
        self.supervisor.stop(name)
        self.progress(f"  {name} stopped")

    def stop(self) -> list[str]:
        """Stop every process this environment started; return their names."""
        stopped = self.supervisor.stop_all()
        realnode.teardown(self.work_dir)  # pods' processes, mounts and namespaces, if any
        (self.work_dir / STATE_FILE).unlink(missing_ok=True)
        return stopped

    def __enter__(self) -> ControlPlane:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    # ---- state shared with other processes (queuectl dev status/down) ----------------------
    def _save_state(self) -> None:
        assert self.ports is not None
        state = {
            "name": self.name,
            "server": self.server,
            "kubeconfig": self.kubeconfig,
            "ports": asdict(self.ports),
            "versions": asdict(pinned()),
            "started_at": time.time(),
            "start_seconds": round(self.start_seconds or 0.0, 2),
        }
        (self.work_dir / STATE_FILE).write_text(json.dumps(state, indent=2))

    def state(self) -> dict[str, object] | None:
        path = self.work_dir / STATE_FILE
        return dict(json.loads(path.read_text())) if path.exists() else None

    @classmethod
    def attach(cls, work_dir: str | Path) -> ControlPlane:
        """The environment recorded in `work_dir`, as another process left it."""
        plane = cls(work_dir)
        state = plane.state()
        if state is not None:
            ports = state["ports"]
            assert isinstance(ports, dict)
            plane.ports = comp.Ports(**ports)
            plane.name = str(state["name"])
        return plane

    def processes(self) -> dict[str, bool]:
        """Each recorded process and whether it still runs."""
        return {r.name: r.alive() for r in self.supervisor.records}

    def is_running(self) -> bool:
        procs = self.processes()
        return bool(procs) and all(procs.values())


# Client identities: bootstrap RBAC grants the two system users what they need; the admin and
# kwok (which writes node and pod status for every fake node) act as cluster admins.
_IDENTITIES: dict[str, tuple[str, tuple[str, ...]]] = {
    "admin": ("queuectl-admin", ("system:masters",)),
    "controller-manager": ("system:kube-controller-manager", ()),
    "scheduler": ("system:kube-scheduler", ()),
    "kwok": ("queuectl-kwok", ("system:masters",)),
}
