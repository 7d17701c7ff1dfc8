"""Command lines and config files for each component: pure functions of paths and ports.

Kept apart from the start-up sequence so that the flags can be read (and unit-tested) in one
place. The layout follows a kubeadm cluster: each component has its own client certificate and
the identity bootstrap RBAC expects, and the controller-manager uses per-controller service
accounts, so RBAC mistakes in queuectl show up here as they would in production.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import yaml

from queuectl.api import names
from queuectl.testenv.build import Binaries

SERVICE_CIDR = "10.96.0.0/16"
KUBERNETES_SERVICE_IP = "10.96.0.1"  # the first address of SERVICE_CIDR
POD_CIDR = "10.0.0.1/16"  # kwok hands out pod IPs from here; a /16 holds 65k pods
SA_ISSUER = "https://kubernetes.default.svc.cluster.local"
NODE_LEASE_SECONDS = 40
"""kwok's node Lease duration (renewed every quarter of it), as a kubelet's default."""
NODE_MONITOR_GRACE_SECONDS = 50
"""kube-controller-manager's default time before a node without a fresh Lease is NotReady."""
CLIENT_QPS = 200
CLIENT_BURST = 400


@dataclass(frozen=True)
class Ports:
    etcd_client: int
    etcd_peer: int
    apiserver: int
    controller_manager: int
    scheduler: int
    kwok: int


@dataclass(frozen=True)
class Layout:
    """Where everything of one environment lives, under its work dir."""

    root: Path

    @property
    def pki(self) -> Path:
        return self.root / "pki"

    def cert(self, stem: str) -> Path:
        return self.pki / f"{stem}.crt"

    def key(self, stem: str) -> Path:
        return self.pki / f"{stem}.key"

    @property
    def etcd_data(self) -> Path:
        return self.root / "etcd-data"

    def kubeconfig(self, component: str) -> Path:
        return self.root / ("kubeconfig" if component == "admin" else f"{component}.kubeconfig")

    @property
    def scheduler_config(self) -> Path:
        return self.root / "scheduler-config.yaml"


def kwok_stage_files() -> list[Path]:
    base = resources.files("queuectl.testenv") / "kwok"
    return [Path(str(base / name)) for name in ("nodes.yaml", "pods.yaml")]


def etcd_argv(b: Binaries, lay: Layout, p: Ports) -> list[str]:
    client, peer = f"http://127.0.0.1:{p.etcd_client}", f"http://127.0.0.1:{p.etcd_peer}"
    return [
        str(b.path("etcd")),
        "--name=queuectl",
        f"--data-dir={lay.etcd_data}",
        f"--listen-client-urls={client}",
        f"--advertise-client-urls={client}",
        f"--listen-peer-urls={peer}",
        f"--initial-advertise-peer-urls={peer}",
        f"--initial-cluster=queuectl={peer}",
        "--unsafe-no-fsync=true",  # a throwaway cluster: speed over durability
        "--quota-backend-bytes=4294967296",
        "--log-level=warn",
    ]


FRONT_PROXY_CLIENT = "front-proxy-client"
"""The common name of the API server's front-proxy client certificate (its own CA signs it)."""


def apiserver_argv(
    b: Binaries, lay: Layout, p: Ports, *, node_gateway: str | None = None
) -> list[str]:
    """Loopback only, unless real nodes need it: then on every address (the nodes reach it
    through `node_gateway`, the host end of their veth) and webhook/aggregated-API calls go to
    endpoint (pod) IPs directly, which the host routes into the node's namespace."""
    real = node_gateway is not None
    return [
        str(b.path("kube-apiserver")),
        f"--etcd-servers=http://127.0.0.1:{p.etcd_client}",
        f"--bind-address={'0.0.0.0' if real else '127.0.0.1'}",
        f"--advertise-address={node_gateway or '127.0.0.1'}",
        f"--enable-aggregator-routing={'true' if real else 'false'}",
        "--kubelet-preferred-address-types=InternalIP,Hostname",
        f"--secure-port={p.apiserver}",
        f"--tls-cert-file={lay.cert('apiserver')}",
        f"--tls-private-key-file={lay.key('apiserver')}",
        f"--client-ca-file={lay.cert('ca')}",
        "--authorization-mode=RBAC",
        "--allow-privileged=true",
        f"--service-cluster-ip-range={SERVICE_CIDR}",
        f"--service-account-issuer={SA_ISSUER}",
        f"--api-audiences={SA_ISSUER}",
        f"--service-account-key-file={lay.cert('sa')}",
        f"--service-account-signing-key-file={lay.key('sa')}",
        # Without real nodes no kube-proxy routes the `kubernetes` Service to a loopback
        # endpoint, so none is published; with them, kube-proxy on each node routes it to
        # `node_gateway`, which pods reach.
        f"--endpoint-reconciler-type={'lease' if real else 'none'}",
        "--profiling=false",
        "--event-ttl=1h",
        # The aggregation layer's front proxy (the visibility API): the API server presents
        # this client certificate when it proxies, naming the caller in the X-Remote-* headers,
        # and publishes the CA and names in kube-system/extension-apiserver-authentication.
        f"--requestheader-client-ca-file={lay.cert('front-proxy-ca')}",
        f"--requestheader-allowed-names={FRONT_PROXY_CLIENT}",
        "--requestheader-username-headers=X-Remote-User",
        "--requestheader-group-headers=X-Remote-Group",
        "--requestheader-extra-headers-prefix=X-Remote-Extra-",
        f"--proxy-client-cert-file={lay.cert('front-proxy-client')}",
        f"--proxy-client-key-file={lay.key('front-proxy-client')}",
    ]


def controller_manager_argv(
    b: Binaries, lay: Layout, p: Ports, node_lease_seconds: int = NODE_LEASE_SECONDS
) -> list[str]:
    kubeconfig = lay.kubeconfig("controller-manager")
    return [
        str(b.path("kube-controller-manager")),
        f"--kubeconfig={kubeconfig}",
        f"--authentication-kubeconfig={kubeconfig}",
        f"--authorization-kubeconfig={kubeconfig}",
        "--leader-elect=false",
        "--bind-address=127.0.0.1",
        f"--secure-port={p.controller_manager}",
        "--use-service-account-credentials=true",
        f"--service-account-private-key-file={lay.key('sa')}",
        f"--root-ca-file={lay.cert('ca')}",
        f"--cluster-signing-cert-file={lay.cert('ca')}",
        f"--cluster-signing-key-file={lay.key('ca')}",
        f"--kube-api-qps={CLIENT_QPS}",
        f"--kube-api-burst={CLIENT_BURST}",
        "--profiling=false",
        # A node is NotReady only once its Lease is older than its whole duration.
        f"--node-monitor-grace-period={max(NODE_MONITOR_GRACE_SECONDS, node_lease_seconds)}s",
    ]


def scheduler_config(lay: Layout) -> str:
    config = {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "clientConnection": {
            "kubeconfig": str(lay.kubeconfig("scheduler")),
            "qps": CLIENT_QPS,
            "burst": CLIENT_BURST,
        },
        "leaderElection": {"leaderElect": False},
    }
    return yaml.safe_dump(config, sort_keys=False)


def scheduler_argv(b: Binaries, lay: Layout, p: Ports) -> list[str]:
    kubeconfig = lay.kubeconfig("scheduler")
    return [
        str(b.path("kube-scheduler")),
        f"--config={lay.scheduler_config}",
        f"--authentication-kubeconfig={kubeconfig}",
        f"--authorization-kubeconfig={kubeconfig}",
        "--bind-address=127.0.0.1",
        f"--secure-port={p.scheduler}",
    ]


def kwok_argv(
    b: Binaries, lay: Layout, p: Ports, node_lease_seconds: int = NODE_LEASE_SECONDS
) -> list[str]:
    argv = [
        str(b.path("kwok")),
        f"--kubeconfig={lay.kubeconfig('kwok')}",
        "--manage-all-nodes=false",
        f"--manage-nodes-with-annotation-selector={names.ANNOTATION_KWOK_NODE}="
        f"{names.KWOK_NODE_FAKE}",
        f"--node-lease-duration-seconds={node_lease_seconds}",
        f"--cidr={POD_CIDR}",
        "--node-ip=10.254.0.1",  # the InternalIP every fake node reports
        f"--server-address=127.0.0.1:{p.kwok}",
    ]
    argv += [f"--config={path}" for path in kwok_stage_files()]
    return argv
