"""The node inventory: `64x8:H100,32x8:A100` or Node manifests.

The short form names a flavor (case-insensitive) per group: its nodes get that flavor's node labels,
so the core matches them exactly as it matches real nodes. When the flavor has a Topology, nodes
are numbered into its levels from fine to coarse: the hostname level is the node's name, the
next level up holds `RACK_NODES` nodes, each level above holds `GROUP_FANOUT` of the one below
(an 8-node rack, 4 racks to a block: the shape of a DGX SuperPOD scalable unit, roughly).
Per GPU a node gets `CPU_PER_GPU` cores and `MEMORY_PER_GPU` of memory, the ratio of the sample
quotas; a node without GPUs is not worth simulating.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from queuectl import convert
from queuectl.api import names
from queuectl.core import GPU, Node
from queuectl.sim.config import SimConfig, SimInputError

RACK_NODES = 8
GROUP_FANOUT = 4
CPU_PER_GPU = 16_000  # millicores
MEMORY_PER_GPU = 256 * 2**30
MAX_NODES = 100_000
"""Nodes in one group of the short form: more than any cluster (each is built in memory)."""
MAX_GPUS_PER_NODE = 1_024

_GROUP = re.compile(r"^\s*(\d+)\s*x\s*(\d+)\s*:\s*([A-Za-z0-9._-]+)\s*$")


def parse_nodes(spec: str, config: SimConfig) -> tuple[Node, ...]:
    """`COUNTxGPUS:FLAVOR[,...]` -> nodes labelled for their flavor (and its topology)."""
    nodes: list[Node] = []
    for part in spec.split(","):
        if not part.strip():
            continue
        m = _GROUP.match(part)
        if m is None:
            raise SimInputError(
                f"--nodes: cannot read {part.strip()!r}; write COUNTxGPUS:FLAVOR, "
                "e.g. 64x8:H100,32x8:A100"
            )
        count, gpus, wanted = int(m[1]), int(m[2]), m[3]
        flavor = next((f for f in config.flavors if f.name.lower() == wanted.lower()), None)
        if flavor is None:
            known = ", ".join(sorted(f.name for f in config.flavors)) or "none"
            raise SimInputError(
                f"--nodes: no ResourceFlavor named {wanted!r} in the manifests (known: {known})"
            )
        if not (0 < count <= MAX_NODES and 0 < gpus <= MAX_GPUS_PER_NODE):
            raise SimInputError(
                f"--nodes: {part.strip()!r} needs 1 to {MAX_NODES:,} nodes of 1 to "
                f"{MAX_GPUS_PER_NODE:,} GPUs each"
            )
        topo = config.topology(flavor.topology_name)
        levels = topo.levels if topo is not None else ()
        for i in range(count):
            name = f"{flavor.name}-{i:04d}"
            labels = {**flavor.node_labels, names.LABEL_HOSTNAME: name}
            labels.update(_domains(levels, flavor.name, i))
            nodes.append(_node(name, labels, gpus))
    if not nodes:
        raise SimInputError("--nodes: no nodes given")
    return tuple(nodes)


def _domains(levels: tuple[str, ...], prefix: str, index: int) -> dict[str, str]:
    """Label values for every level above the node: rack = index // RACK_NODES, and so on."""
    out: dict[str, str] = {}
    size = RACK_NODES
    for level in reversed(levels):
        if level == names.LABEL_HOSTNAME:
            continue
        short = level.rsplit("/", 1)[-1]
        out[level] = f"{prefix}-{short}-{index // size}"
        size *= GROUP_FANOUT
    return out


def _node(name: str, labels: Mapping[str, str], gpus: int) -> Node:
    return Node(
        name=name,
        labels=dict(labels),
        allocatable={GPU: gpus, "cpu": CPU_PER_GPU * gpus, "memory": MEMORY_PER_GPU * gpus},
    )


def nodes_from_manifests(docs: Iterable[tuple[str, Any]]) -> tuple[Node, ...]:
    """Node objects (as `kubectl get nodes -o yaml` prints them, or written by hand): read by
    the controller's own conversion; a node without status conditions counts as Ready."""
    out: list[Node] = []
    for where, doc in docs:
        if doc is None:
            continue
        items = doc.get("items") if isinstance(doc, dict) and doc.get("kind") == "List" else [doc]
        for item in items or ():
            if not isinstance(item, dict) or item.get("kind") != "Node":
                raise SimInputError(f"{where}: expected Node objects (kind: Node)")
            status = dict(item.get("status") or {})
            status.setdefault("conditions", [{"type": "Ready", "status": "True"}])
            try:
                node = convert.node({**item, "status": status})
            except (KeyError, ValueError) as err:
                raise SimInputError(f"{where}: a Node is malformed: {err}") from None
            if node.allocatable.get(GPU, 0) <= 0:
                raise SimInputError(
                    f"{where}: Node {node.name} has no status.allocatable nvidia.com/gpu"
                )
            out.append(node)
    if not out:
        raise SimInputError("the nodes file holds no Node")
    return tuple(out)
