"""Discovery: what a node's GPUs are and how they connect, turned into GFD-compatible labels.

`read_inventory` is the one blocking function here (it calls the reader); the rest is pure.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from itertools import combinations

from queuectl.agent.reader import (
    GpuInfo,
    GpuNotAnswering,
    GpuReader,
    MigState,
    PairTopology,
    PcieLevel,
)
from queuectl.api import names

MIB = 1024 * 1024

# Compute capability -> architecture family, as GPU Feature Discovery names them.
_FAMILY_BY_MAJOR = {
    3: "kepler",
    5: "maxwell",
    6: "pascal",
    8: "ampere",
    9: "hopper",
    10: "blackwell",
    12: "blackwell",
}


@dataclass(frozen=True)
class Inventory:
    """The GPUs of a node (in index order) and every pair's topology (a < b)."""

    gpus: tuple[GpuInfo, ...]
    pairs: tuple[PairTopology, ...] = ()
    mig: tuple[MigState, ...] = ()
    """Per GPU, in the order of `gpus` (empty: not read)."""

    @property
    def count(self) -> int:
        return len(self.gpus)


def read_inventory(reader: GpuReader) -> Inventory:
    """Blocking: ask the reader for every GPU and pair. A GPU that does not answer is left out."""
    gpus: list[GpuInfo] = []
    for index in range(reader.device_count()):
        try:
            gpus.append(reader.device(index))
        except GpuNotAnswering:
            continue
    pairs = [reader.pair(a.index, b.index) for a, b in combinations(gpus, 2)]
    mig = []
    for gpu in gpus:
        try:
            mig.append(reader.mig(gpu.index))
        except GpuNotAnswering:
            mig.append(MigState())
    return Inventory(tuple(gpus), tuple(pairs), tuple(mig))


def family(cc: tuple[int, int] | None) -> str:
    """Architecture family from compute capability (8.9 is Ada Lovelace, 7.5 Turing)."""
    if cc is None:
        return "undefined"
    major, minor = cc
    if major == 7:
        return "turing" if minor >= 5 else "volta"
    if major == 8 and minor == 9:
        return "ada-lovelace"
    return _FAMILY_BY_MAJOR.get(major, "undefined")


_INVALID_LABEL_CHARS = re.compile(r"[^A-Za-z0-9._-]")


def label_value(text: str) -> str:
    """A valid label value: spaces as '-', other invalid characters dropped, <= 63 characters."""
    value = _INVALID_LABEL_CHARS.sub("", text.strip().replace(" ", "-"))[:63]
    return value.strip("-_.")


def nvlink_class(inventory: Inventory) -> str:
    """The interconnect class of the node from its pairwise topology.

    nvswitch: every pair over NVLink through NVSwitches; full-mesh: every pair over direct NVLink;
    pairs: NVLink only in disjoint pairs (bridged PCIe cards); partial-mesh: anything else with
    some NVLink; none: no NVLink (or a single GPU).
    """
    if inventory.count < 2:
        return names.NVLINK_CLASS_NONE
    linked = [p for p in inventory.pairs if p.over_nvlink]
    if not linked:
        return names.NVLINK_CLASS_NONE
    if len(linked) == inventory.count * (inventory.count - 1) // 2:
        if any(p.via_switch for p in linked):
            return names.NVLINK_CLASS_NVSWITCH
        return names.NVLINK_CLASS_FULL_MESH
    degree: dict[int, int] = {}
    for p in linked:
        degree[p.a] = degree.get(p.a, 0) + 1
        degree[p.b] = degree.get(p.b, 0) + 1
    if max(degree.values()) == 1:
        return names.NVLINK_CLASS_PAIRS
    return names.NVLINK_CLASS_PARTIAL_MESH


_PCIE_CELL = {
    PcieLevel.BOARD: "BRD",
    PcieLevel.PIX: "PIX",
    PcieLevel.PXB: "PXB",
    PcieLevel.PHB: "PHB",
    PcieLevel.NODE: "NODE",
    PcieLevel.SYS: "SYS",
    PcieLevel.UNKNOWN: "?",
}


def pair_cell(pair: PairTopology) -> str:
    """A matrix cell as `nvidia-smi topo -m` words it: NV<links>, NV (links unknown), PCIe level."""
    if pair.nvlinks > 0:
        return f"NV{pair.nvlinks}"
    if pair.p2p_nvlink:
        return "NV"
    return _PCIE_CELL[pair.pcie]


def topology_matrix(inventory: Inventory) -> str:
    """Compact JSON of the per-pair matrix, rows and columns in GPU index order."""
    position = {gpu.index: i for i, gpu in enumerate(inventory.gpus)}
    n = inventory.count
    rows = [["X" if i == j else "?" for j in range(n)] for i in range(n)]
    for pair in inventory.pairs:
        if pair.a in position and pair.b in position:
            i, j = position[pair.a], position[pair.b]
            rows[i][j] = rows[j][i] = pair_cell(pair)
    body = {"v": 1, "gpus": [g.index for g in inventory.gpus], "matrix": rows}
    return json.dumps(body, separators=(",", ":"))


def clique(inventory: Inventory) -> str | None:
    """`<clusterUUID>.<cliqueID>` when the GPUs agree on one registered fabric clique."""
    fabrics = {g.fabric for g in inventory.gpus}
    if len(fabrics) != 1:
        return None
    (fabric,) = fabrics
    return None if fabric is None else f"{fabric.cluster_uuid}.{fabric.clique_id}"


def gfd_labels(inventory: Inventory) -> dict[str, str]:
    """The GPU Feature Discovery labels, from the first GPU as GFD does (empty without GPUs)."""
    if not inventory.gpus:
        return {}
    first = inventory.gpus[0]
    labels = {
        names.LABEL_GPU_PRODUCT: label_value(first.name),
        names.LABEL_GPU_COUNT: str(inventory.count),
        names.LABEL_GPU_FAMILY: family(first.compute_capability),
    }
    if first.memory_total_bytes > 0:  # 0: the GPU would not say
        labels[names.LABEL_GPU_MEMORY] = str(first.memory_total_bytes // MIB)
    if first.compute_capability is not None:
        labels[names.LABEL_GPU_COMPUTE_MAJOR] = str(first.compute_capability[0])
        labels[names.LABEL_GPU_COMPUTE_MINOR] = str(first.compute_capability[1])
    fabric_clique = clique(inventory)
    if fabric_clique is not None:
        labels[names.LABEL_GPU_CLIQUE] = fabric_clique
    return labels


GFD_LABEL_KEYS = frozenset(
    {
        names.LABEL_GPU_PRODUCT,
        names.LABEL_GPU_COUNT,
        names.LABEL_GPU_MEMORY,
        names.LABEL_GPU_FAMILY,
        names.LABEL_GPU_COMPUTE_MAJOR,
        names.LABEL_GPU_COMPUTE_MINOR,
        names.LABEL_GPU_CLIQUE,
        names.LABEL_MIG_CAPABLE,
        names.LABEL_MIG_STRATEGY,
        names.LABEL_GPU_REPLICAS,
        names.LABEL_GPU_SHARING_STRATEGY,
    }
)
GFD_LABEL_PREFIXES = (names.RESOURCE_MIG_PREFIX,)
"""GFD's per-profile MIG labels (`nvidia.com/mig-1g.10gb.count`): owned by prefix."""
