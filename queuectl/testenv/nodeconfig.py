"""Config files of one real node: containerd, the CNI network, the kubelet and its identity.

Pure writers of files under the node's directory, kept apart from the namespace and process
handling in realnode.py so the settings can be read in one place.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import yaml

from queuectl.testenv.kubeconfig import write_kubeconfig
from queuectl.testenv.nodebuild import CNI_PLUGINS, NodeBinaries
from queuectl.testenv.pki import CertificateAuthority

if TYPE_CHECKING:
    from queuectl.testenv.realnode import RealNode

REAL_NODE_LABEL = "testenv.queuectl.io/real-node"

# Bootstrap RBAC defines `system:node` but (since 1.8) binds it to nobody; bind it to the
# nodes group as kubeadm's Node authorizer setup would allow.
# kube-proxy acts as `system:kube-proxy`, bound to `system:node-proxier` like kubeadm does.
NODE_RBAC = """\
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: queuectl-testenv:nodes
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: "system:node"}
subjects:
- {apiGroup: rbac.authorization.k8s.io, kind: Group, name: "system:nodes"}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: queuectl-testenv:kube-proxy
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: "system:node-proxier"}
subjects:
- {apiGroup: rbac.authorization.k8s.io, kind: User, name: "system:kube-proxy"}
"""
POD_NETWORK = "10.244.0.0/16"  # every real node's pod CIDR is a /24 of it


@dataclass(frozen=True)
class NodeFiles:
    containerd_config: Path
    kubelet_flags: list[str]
    kube_proxy_flags: list[str]


def containerd_config(node: RealNode, cni_bin: Path, cni_conf: Path, pause_image: str) -> str:
    """containerd 1.6 (Debian) CRI config: everything under the node dir, cgroupfs, runc."""
    base = Path(node.dir) / "containerd"
    cri = 'plugins."io.containerd.grpc.v1.cri"'
    return "\n".join(
        [
            "version = 2",
            f'root = "{base / "root"}"',
            f'state = "{base / "state"}"',
            "[grpc]",
            f'  address = "{node.containerd_socket}"',
            "[ttrpc]",
            f'  address = "{node.containerd_socket}.ttrpc"',
            '[plugins."io.containerd.internal.v1.opt"]',
            f'  path = "{base / "opt"}"',
            f"[{cri}]",
            f'  sandbox_image = "{pause_image}"',
            "  netns_mounts_under_state_dir = true",
            # This sandbox (and rootless hosts) refuse a negative oom_score_adj: the sandbox's
            # -998 makes runc fail with "can't get final child's PID from pipe: EOF".
            "  restrict_oom_score_adj = true",
            f"[{cri}.containerd]",
            '  snapshotter = "overlayfs"',
            '  default_runtime_name = "runc"',
            f"[{cri}.containerd.runtimes.runc]",
            '  runtime_type = "io.containerd.runc.v2"',
            f"[{cri}.containerd.runtimes.runc.options]",
            "  SystemdCgroup = false",
            f'  Root = "{Path(node.dir) / "runc"}"',  # runc's state, not /run/containerd/runc
            f"[{cri}.cni]",
            f'  bin_dir = "{cni_bin}"',
            f'  conf_dir = "{cni_conf}"',
            "",
        ]
    )


def cni_conflist(node: RealNode) -> str:
    """A bridge in the node's namespace; host-local IPAM over the node's pod CIDR."""
    ipam = {
        "type": "host-local",
        "ranges": [[{"subnet": node.pod_cidr}]],
        "routes": [{"dst": "0.0.0.0/0"}],
        "dataDir": str(Path(node.dir) / "cni" / "ipam"),
    }
    bridge = {"type": "bridge", "bridge": "cni0", "isGateway": True, "ipMasq": False}
    conf = {
        "cniVersion": "1.0.0",
        "name": "queuectl",
        "plugins": [
            {**bridge, "hairpinMode": True, "ipam": ipam},
            {"type": "portmap", "capabilities": {"portMappings": True}},
        ],
    }
    return json.dumps(conf, indent=2)


def kubelet_config(node: RealNode) -> str:
    """No eviction or image GC (a throwaway node on a shared disk), cgroupfs under the node's
    own cgroup so teardown finds every pod process, cgroup v1 allowed (this host class)."""
    config = {
        "apiVersion": "kubelet.config.k8s.io/v1beta1",
        "kind": "KubeletConfiguration",
        "address": node.node_ip,
        "healthzBindAddress": node.node_ip,
        "healthzPort": 10248,
        "readOnlyPort": 0,
        # The API server reaches the kubelet (logs, exec) without a client certificate.
        "authentication": {"anonymous": {"enabled": True}, "webhook": {"enabled": False}},
        "authorization": {"mode": "AlwaysAllow"},
        "containerRuntimeEndpoint": f"unix://{node.containerd_socket}",
        "cgroupDriver": "cgroupfs",
        "cgroupRoot": f"/{node.cgroup}",
        "failCgroupV1": False,
        "failSwapOn": False,
        "podCIDR": node.pod_cidr,
        "maxPods": 30,
        "clusterDomain": "cluster.local",
        "resolvConf": "/etc/resolv.conf",
        "evictionHard": {"memory.available": "0%", "nodefs.available": "0%"},
        "imageGCHighThresholdPercent": 100,
        "imageGCLowThresholdPercent": 99,
        "serializeImagePulls": False,
        "registerNode": True,
    }
    return yaml.safe_dump(config, sort_keys=False)


def kube_proxy_config(node: RealNode, kubeconfig: Path) -> str:
    """iptables mode inside the node's namespace; conntrack sysctls left alone (shared host)."""
    config = {
        "apiVersion": "kubeproxy.config.k8s.io/v1alpha1",
        "kind": "KubeProxyConfiguration",
        "clientConnection": {"kubeconfig": str(kubeconfig)},
        "mode": "iptables",
        "hostnameOverride": node.name,
        "clusterCIDR": POD_NETWORK,
        "bindAddress": node.node_ip,
        "healthzBindAddress": f"{node.node_ip}:10256",
        "metricsBindAddress": f"{node.node_ip}:10249",
        "conntrack": {
            "maxPerCore": 0,
            "tcpEstablishedTimeout": "0s",
            "tcpCloseWaitTimeout": "0s",
        },
    }
    return yaml.safe_dump(config, sort_keys=False)


def write(
    node: RealNode,
    binaries: NodeBinaries,
    ca: CertificateAuthority,
    server: str,
    pause_image: str,
) -> NodeFiles:
    """Write every file one node needs; return containerd's config and the kubelet's flags."""
    base = Path(node.dir)
    cni_bin, cni_conf = base / "cni" / "bin", base / "cni" / "net.d"
    for d in (base / "containerd", cni_bin, cni_conf, base / "kubelet"):
        d.mkdir(parents=True, exist_ok=True)
    for plugin in CNI_PLUGINS:
        link = cni_bin / plugin
        link.unlink(missing_ok=True)
        link.symlink_to(binaries.path(plugin))
    (cni_conf / "10-queuectl.conflist").write_text(cni_conflist(node))
    config = base / "containerd" / "config.toml"
    config.write_text(containerd_config(node, cni_bin, cni_conf, pause_image))
    kubelet_yaml = base / "kubelet" / "config.yaml"
    kubelet_yaml.write_text(kubelet_config(node))
    identity = ca.issue_client(f"system:node:{node.name}", ("system:nodes",))
    kubeconfig = write_kubeconfig(
        base / "kubelet" / "kubeconfig", server, ca.cert_pem, identity, node.name
    )
    flags = [
        f"--config={kubelet_yaml}",
        f"--kubeconfig={kubeconfig}",
        f"--root-dir={node.kubelet_root}",
        f"--cert-dir={base / 'kubelet' / 'pki'}",
        f"--hostname-override={node.name}",
        f"--node-ip={node.node_ip}",
        f"--node-labels={REAL_NODE_LABEL}=true",
        "--v=1",
    ]
    proxy_identity = ca.issue_client("system:kube-proxy")
    proxy_kubeconfig = write_kubeconfig(
        base / "kube-proxy" / "kubeconfig", server, ca.cert_pem, proxy_identity, node.name
    )
    proxy_yaml = base / "kube-proxy" / "config.yaml"
    proxy_yaml.write_text(kube_proxy_config(node, proxy_kubeconfig))
    return NodeFiles(config, flags, [f"--config={proxy_yaml}"])
