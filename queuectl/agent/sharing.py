"""GPU sharing as GPU Feature Discovery and the NVIDIA device plugin name it: MIG and time-slicing.

NVML shows MIG devices; which strategy the device plugin advertises them under (`none`, `single`,
`mixed`) and how many time-slicing replicas it makes of each GPU are its configuration, so the
agent is told them (`--mig-strategy`, `--time-slicing-replicas`). Pure.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from dataclasses import dataclass

from queuectl.agent.reader import GpuInfo, MigDevice, MigState
from queuectl.api import names

MIB = 1024 * 1024
GIB = 1024 * MIB
MIG_STRATEGIES = ("none", "single", "mixed")


@dataclass(frozen=True)
class Sharing:
    """The device plugin's sharing configuration on this node."""

    mig_strategy: str = "none"
    replicas: int = 1  # time-slicing replicas per GPU (1: not shared)
    rename_shared: bool = False  # renameByDefault: shared GPUs are nvidia.com/gpu.shared

    def __post_init__(self) -> None:
        if self.mig_strategy not in MIG_STRATEGIES:
            raise ValueError(
                f"MIG strategy {self.mig_strategy!r} is not one of {', '.join(MIG_STRATEGIES)}"
            )
        if self.replicas < 1:
            raise ValueError(f"time-slicing replicas must be at least 1, not {self.replicas}")


def mig_memory_gb(device_memory_bytes: int, mig_memory_mib: int) -> int:
    """A MIG device's memory in the profile's name: its share of the GPU rounded up to eighths,
    times the GPU's memory in whole GB (as go-nvlib names it: 9856 MiB of an 80 GB H100 is 10)."""
    if device_memory_bytes <= 0:
        return math.ceil(mig_memory_mib / 1024)
    fraction = math.ceil(mig_memory_mib * MIB / device_memory_bytes * 8) / 8
    total_gb = (device_memory_bytes + GIB - 1) // GIB
    return round(fraction * total_gb)


def profile(gpu: GpuInfo, device: MigDevice) -> str:
    """`1g.10gb`, or `1c.3g.40gb` when the compute instance is smaller than its GPU instance."""
    gb = mig_memory_gb(gpu.memory_total_bytes, device.memory_mib)
    base = f"{device.gi_slices}g.{gb}gb"
    return base if device.ci_slices == device.gi_slices else f"{device.ci_slices}c.{base}"


def mig_resource(name: str) -> str:
    return f"{names.RESOURCE_MIG_PREFIX}{name}"


def profiles(gpus: tuple[GpuInfo, ...], mig: tuple[MigState, ...]) -> Counter[str]:
    """MIG devices per profile over the node's MIG-enabled GPUs."""
    out: Counter[str] = Counter()
    for gpu, state in zip(gpus, mig, strict=False):
        if state.enabled:
            out.update(profile(gpu, d) for d in state.devices)
    return out


def resources(gpus: tuple[GpuInfo, ...], mig: tuple[MigState, ...], cfg: Sharing) -> dict[str, int]:
    """The extended resources the device plugin advertises for these GPUs and this config."""
    shared = names.RESOURCE_GPU + (".shared" if cfg.replicas > 1 and cfg.rename_shared else "")
    whole = sum(
        1
        for g, st in zip(gpus, mig, strict=False)
        if not (st.enabled and cfg.mig_strategy != "none")
    )
    out: dict[str, int] = {}
    if whole:
        out[shared] = whole * cfg.replicas
    counts = profiles(gpus, mig)
    if cfg.mig_strategy == "mixed":
        out.update({mig_resource(p): n for p, n in sorted(counts.items())})
    elif cfg.mig_strategy == "single" and counts:
        out[names.RESOURCE_GPU] = out.get(names.RESOURCE_GPU, 0) + sum(counts.values())
    return out


def labels(
    gpus: tuple[GpuInfo, ...], mig: tuple[MigState, ...], cfg: Sharing, product: str
) -> dict[str, str]:
    """GFD's sharing labels; `product` is the plain product label, which they may replace."""
    if not gpus:
        return {}
    out = {
        names.LABEL_MIG_CAPABLE: "true" if any(s.capable for s in mig) else "false",
        names.LABEL_GPU_REPLICAS: str(cfg.replicas),
        names.LABEL_GPU_SHARING_STRATEGY: "time-slicing" if cfg.replicas > 1 else "none",
    }
    if cfg.replicas > 1 and not cfg.rename_shared:
        out[names.LABEL_GPU_PRODUCT] = f"{product}-SHARED"[:63]
    if not any(s.capable for s in mig):
        return out
    out[names.LABEL_MIG_STRATEGY] = cfg.mig_strategy
    counts = profiles(gpus, mig)
    if cfg.mig_strategy == "mixed":
        for name, n in sorted(counts.items()):
            out[f"{mig_resource(name)}.count"] = str(n)
    elif cfg.mig_strategy == "single" and len(counts) == 1:
        (name,) = counts
        out[names.LABEL_GPU_PRODUCT] = f"{product}-MIG-{name}"[:63]
        out[names.LABEL_GPU_COUNT] = str(counts[name])
        gb = name.rsplit(".", 1)[-1].removesuffix("gb")
        out[names.LABEL_GPU_MEMORY] = str(int(gb) * 1024)
    return out


def layout(gpus: tuple[GpuInfo, ...], mig: tuple[MigState, ...]) -> str | None:
    """Compact JSON of where each MIG device sits: {"v":1,"gpus":{"0":[["1g.10gb",0,1],...]}}
    (profile, first memory slice, slices); None when no GPU has MIG enabled."""
    placed = {
        str(gpu.index): [[profile(gpu, d), d.start, d.size] for d in state.devices]
        for gpu, state in zip(gpus, mig, strict=False)
        if state.enabled
    }
    if not placed:
        return None
    return json.dumps({"v": 1, "gpus": placed}, separators=(",", ":"))
