"""Fake GPU nodes: Node objects that kwok keeps Ready, labelled like GPU Feature Discovery would.

A node carries the GFD labels (product, count, memory, family), queuectl's topology labels
(block, rack, hostname) and `nvidia.com/gpu` in capacity and allocatable, so kube-scheduler and
queuectl treat it as a real GPU server. Racks are unique names inside their block, blocks unique
per `name_prefix`, so two fleets never share a topology domain by accident.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any, cast

from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

from queuectl.api import gpushare, names
from queuectl.testenv.errors import ComponentFailed

H100 = "NVIDIA-H100-80GB-HBM3"
A100 = "NVIDIA-A100-SXM4-80GB"

# product -> (family, compute major, compute minor); unknown products get no family labels.
_FAMILIES: dict[str, tuple[str, int, int]] = {
    "NVIDIA-H100": ("hopper", 9, 0),
    "NVIDIA-H200": ("hopper", 9, 0),
    "NVIDIA-GH200": ("hopper", 9, 0),
    "NVIDIA-A100": ("ampere", 8, 0),
    "NVIDIA-A10": ("ampere", 8, 6),
    "NVIDIA-L40S": ("ada-lovelace", 8, 9),
    "NVIDIA-L4": ("ada-lovelace", 8, 9),
    "NVIDIA-B200": ("blackwell", 10, 0),
}


@dataclass(frozen=True)
class FakeNode:
    name: str
    block: str
    rack: str
    product: str
    gpus: int


@dataclass(frozen=True)
class GpuNodeSpec:
    """How many fake GPU nodes to create and what they look like."""

    count: int
    gpus_per_node: int = 8
    product: str = H100
    memory_mib: int = 81559
    blocks: int = 1
    racks_per_block: int = 1
    name_prefix: str = "gpu"
    cpu: str = "128"
    memory: str = "2Ti"
    pods: int = 110
    labels: dict[str, str] = field(default_factory=dict)
    taints: list[dict[str, str]] = field(default_factory=list)
    mig_layout: str | None = None
    """Every GPU partitioned so (`all-1g.10gb`, `3g.40gb+2g.20gb+1g.10gb`), advertised under
    the mixed strategy as the GPU Operator does: `nvidia.com/mig-<profile>`, no nvidia.com/gpu."""
    replicas: int = 1
    """Time-slicing replicas per GPU (1: not shared): nvidia.com/gpu = GPUs x replicas."""

    def __post_init__(self) -> None:
        if self.replicas < 1:
            raise ValueError("replicas must be at least 1")
        if self.mig_layout is not None:
            gpushare.parse_layout(self.mig_layout, -(-self.memory_mib // 1024))
        if self.count < 0 or self.gpus_per_node < 0 or self.memory_mib < 0:
            raise ValueError("count, gpus_per_node and memory_mib must not be negative")
        if self.blocks < 1 or self.racks_per_block < 1:
            raise ValueError("blocks and racks_per_block must be at least 1")


def layout(spec: GpuNodeSpec) -> list[FakeNode]:
    """Spread the nodes evenly: fill rack after rack, block after block."""
    racks = spec.blocks * spec.racks_per_block
    per_rack = max(1, math.ceil(spec.count / racks))
    nodes = []
    for i in range(spec.count):
        rack_index = min(i // per_rack, racks - 1)
        block, rack = divmod(rack_index, spec.racks_per_block)
        block_name = f"{spec.name_prefix}-b{block}"
        nodes.append(
            FakeNode(
                name=f"{spec.name_prefix}-{i}",
                block=block_name,
                rack=f"{block_name}-r{rack}",
                product=spec.product,
                gpus=spec.gpus_per_node,
            )
        )
    return nodes


def family_labels(product: str) -> dict[str, str]:
    for prefix, (family, major, minor) in _FAMILIES.items():
        if product == prefix or product.startswith(prefix + "-"):
            return {
                names.LABEL_GPU_FAMILY: family,
                names.LABEL_GPU_COMPUTE_MAJOR: str(major),
                names.LABEL_GPU_COMPUTE_MINOR: str(minor),
            }
    return {}


def _mig_counts(node: FakeNode, spec: GpuNodeSpec) -> dict[str, int]:
    if spec.mig_layout is None:
        return {}
    per_gpu = gpushare.parse_layout(spec.mig_layout, -(-spec.memory_mib // 1024))
    return {p: per_gpu.count(p) * node.gpus for p in sorted(set(per_gpu))}


def device_resources(node: FakeNode, spec: GpuNodeSpec) -> dict[str, str]:
    """What the NVIDIA device plugin would advertise: MIG slices (mixed strategy) or GPUs,
    times the time-slicing replicas."""
    if spec.mig_layout is not None:
        return {
            f"{names.RESOURCE_MIG_PREFIX}{p}": str(n) for p, n in _mig_counts(node, spec).items()
        }
    return {names.GPU_RESOURCE: str(node.gpus * spec.replicas)}


def sharing_labels(node: FakeNode, spec: GpuNodeSpec) -> dict[str, str]:
    """GPU Feature Discovery's MIG and time-slicing labels for this configuration."""
    out = {
        names.LABEL_GPU_REPLICAS: str(spec.replicas),
        names.LABEL_GPU_SHARING_STRATEGY: "time-slicing" if spec.replicas > 1 else "none",
    }
    if spec.replicas > 1:
        out[names.LABEL_GPU_PRODUCT] = f"{node.product}-SHARED"
    if spec.mig_layout is not None:
        out[names.LABEL_MIG_CAPABLE] = "true"
        out[names.LABEL_MIG_STRATEGY] = "mixed"
        for p, n in _mig_counts(node, spec).items():
            out[f"{names.RESOURCE_MIG_PREFIX}{p}.count"] = str(n)
    return out


def node_manifest(node: FakeNode, spec: GpuNodeSpec) -> dict[str, Any]:
    """The Node object for one fake GPU server (status included: kwok keeps it)."""
    labels = {
        "kubernetes.io/arch": "amd64",
        "kubernetes.io/os": "linux",
        "type": "kwok",
        names.LABEL_HOSTNAME: node.name,
        names.LABEL_TESTENV_FAKE_NODE: "true",
        names.LABEL_TOPOLOGY_BLOCK: node.block,
        names.LABEL_TOPOLOGY_RACK: node.rack,
        **family_labels(node.product),
        **spec.labels,
    }
    resources = {"cpu": spec.cpu, "memory": spec.memory, "pods": str(spec.pods)}
    if node.gpus:
        labels[names.LABEL_GPU_PRODUCT] = node.product
        labels[names.LABEL_GPU_COUNT] = str(node.gpus)
        labels[names.LABEL_GPU_MEMORY] = str(spec.memory_mib)
        labels.update(sharing_labels(node, spec))
        resources.update(device_resources(node, spec))
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": node.name,
            "labels": labels,
            "annotations": {names.ANNOTATION_KWOK_NODE: names.KWOK_NODE_FAKE},
        },
        "spec": {"taints": list(spec.taints)} if spec.taints else {},
        "status": {"capacity": dict(resources), "allocatable": dict(resources)},
    }


def _ready_and_schedulable(node: Any, wanted_taints: set[str]) -> bool:
    conditions = node.status.conditions or []
    ready = any(c.type == "Ready" and c.status == "True" for c in conditions)
    taints = {t.key for t in (node.spec.taints or [])}
    return ready and taints <= wanted_taints


def create_gpu_nodes(
    api_client: k8s.ApiClient, spec: GpuNodeSpec, *, timeout: float = 90.0
) -> list[FakeNode]:
    """Create the nodes (existing ones are kept) and wait until Ready without start-up taints."""
    core = k8s.CoreV1Api(api_client)
    nodes = layout(spec)
    for node in nodes:
        try:
            core.create_node(cast(Any, node_manifest(node, spec)))
        except ApiException as exc:
            if exc.status != 409:
                raise
    wanted_taints = {t["key"] for t in spec.taints}
    pending = {n.name for n in nodes}
    deadline = time.monotonic() + timeout
    while pending:
        for name in sorted(pending):
            if _ready_and_schedulable(core.read_node(name), wanted_taints):
                pending.discard(name)
        if not pending:
            break
        if time.monotonic() > deadline:
            raise ComponentFailed(
                f"fake nodes {', '.join(sorted(pending)[:5])} were not Ready and untainted "
                f"after {timeout:.0f}s",
                "check the kwok and kube-controller-manager logs in the environment's logs/",
            )
        time.sleep(0.25)
    return nodes
