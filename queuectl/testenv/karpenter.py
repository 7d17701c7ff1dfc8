"""Karpenter (its kwok cloud provider) for the local control plane: what it may create.

Karpenter's kwok provider "launches" an instance by creating a Node object (annotated
`kwok.x-k8s.io/node: fake`, which the testenv's kwok already manages: kwok makes it Ready and
runs its pods) with the allocatable of the chosen instance type. Its built-in instance types
carry no GPUs, so queuectl writes its own file: GPU servers shaped like the ones
`queuectl dev up` fakes (8 x H100, 8 x A100), and a NodePool that labels its nodes as GPU
Feature Discovery would, in one rack, so a gang it grows lands in one topology domain.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Final

from queuectl.api import names
from queuectl.testenv.cluster import Cluster
from queuectl.testenv.operatorargs import RunDir

ZONE: Final = "test-zone-a"
RACK_LABEL: Final = "topology.queuectl.io/rack"
BLOCK_LABEL: Final = "topology.queuectl.io/block"
NODE_CLASS: Final = "queuectl-kwok"

INSTANCE_TYPES: Final = (
    # name, GPUs, product, cpu, memory, price per hour
    ("gpu-8x-h100", 8, "NVIDIA-H100-80GB-HBM3", "192", "2048Gi", 98.0),
    ("gpu-8x-a100", 8, "NVIDIA-A100-SXM4-80GB", "96", "1152Gi", 32.0),
)


def instance_types() -> list[dict[str, Any]]:
    """Karpenter's kwok instance-type file, one on-demand offering in one zone each."""
    return [
        {
            "name": name,
            "architecture": "amd64",
            "operatingSystems": ["linux"],
            "resources": {
                "cpu": cpu,
                "memory": memory,
                "pods": "110",
                "ephemeral-storage": "2Ti",
                names.GPU_RESOURCE: str(gpus),
            },
            "offerings": [
                {
                    "Price": price,
                    "Available": True,
                    "Requirements": [
                        {
                            "key": "karpenter.sh/capacity-type",
                            "operator": "In",
                            "values": ["on-demand"],
                        },
                        {"key": "topology.kubernetes.io/zone", "operator": "In", "values": [ZONE]},
                    ],
                }
            ],
        }
        for name, gpus, _product, cpu, memory, price in INSTANCE_TYPES
    ]


def write_instance_types(directory: Path) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "karpenter-instance-types.json"
    path.write_text(json.dumps(instance_types(), indent=2))
    return path


def node_pool(
    name: str,
    *,
    instance_type: str = "gpu-8x-h100",
    product: str = "NVIDIA-H100-80GB-HBM3",
    rack: str = "rack-k1",
    block: str = "block-k",
    consolidate_after: str = "15s",
    gpu_limit: int = 64,
    labels: dict[str, str] | None = None,
    taints: list[dict[str, str]] | None = None,
) -> dict[str, Any]:
    """A NodePool of one GPU instance type whose nodes carry GFD's labels and one rack's
    topology labels (plus `labels` and `taints`, to keep a pool to the work that asks for it);
    empty nodes are removed `consolidate_after` after they empty."""
    template_spec: dict[str, Any] = {
        "requirements": [
            {
                "key": "node.kubernetes.io/instance-type",
                "operator": "In",
                "values": [instance_type],
            },
            {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
        ],
        "nodeClassRef": {"group": "karpenter.kwok.sh", "kind": "KWOKNodeClass", "name": NODE_CLASS},
        "expireAfter": "Never",
    }
    if taints:
        template_spec["taints"] = [dict(t) for t in taints]
    node_labels = {names.LABEL_GPU_PRODUCT: product, RACK_LABEL: rack, BLOCK_LABEL: block}
    return {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodePool",
        "metadata": {"name": name},
        "spec": {
            "template": {
                "metadata": {"labels": {**node_labels, **(labels or {})}},
                "spec": template_spec,
            },
            "limits": {names.GPU_RESOURCE: str(gpu_limit)},
            "disruption": {
                "consolidationPolicy": "WhenEmptyOrUnderutilized",
                "consolidateAfter": consolidate_after,
                "budgets": [{"nodes": "100%"}],
            },
        },
    }


def node_class() -> dict[str, Any]:
    return {
        "apiVersion": "karpenter.kwok.sh/v1alpha1",
        "kind": "KWOKNodeClass",
        "metadata": {"name": NODE_CLASS},
    }


def argv(binary: Path, run: RunDir) -> list[str]:
    """Karpenter's kwok provider as one process outside a cluster (operators.OPERATORS)."""
    return [
        str(binary),
        "--disable-leader-election",
        f"--metrics-port={run.webhook_port}",  # it has no webhooks: the spare port serves this
        f"--health-probe-port={run.health_port}",
        f"--instance-types-file-path={write_instance_types(run.tmp)}",
        "--log-level=info",
    ]


def apply_node_class(cluster: Cluster) -> None:
    """The one KWOKNodeClass its NodePools point at (see node_pool), before it starts."""
    cluster.apply_server_side(node_class())
