"""The one seam between the agent and the GPUs: `GpuReader` and the plain data it returns.

Everything above this seam (discovery, health, node state) is pure and tested with the scripted
reader; the only implementation that touches hardware is `queuectl.agent.nvml.NvmlReader`.
Every method blocks: the async shell calls them on its dedicated NVML thread.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Protocol, runtime_checkable


class PcieLevel(enum.IntEnum):
    """Closest common PCIe ancestor of two GPUs, in `nvidia-smi topo -m` terms (nearer is lower)."""

    BOARD = 0  # same board (multi-GPU card)
    PIX = 10  # one PCIe switch
    PXB = 20  # several PCIe switches, no host bridge
    PHB = 30  # a host bridge
    NODE = 40  # host bridges within one NUMA node
    SYS = 50  # across NUMA nodes (SMP interconnect)
    UNKNOWN = 99


@dataclass(frozen=True)
class FabricInfo:
    """Multi-node NVLink fabric membership (GB200 NVL72 and the like); only kept when registered."""

    cluster_uuid: str
    clique_id: int


@dataclass(frozen=True)
class GpuInfo:
    """What discovery needs of one GPU; stable while the driver is loaded."""

    index: int
    uuid: str
    name: str  # NVML product name, e.g. "NVIDIA H100 80GB HBM3"
    memory_total_bytes: int
    pci_bus_id: str
    compute_capability: tuple[int, int] | None = None
    fabric: FabricInfo | None = None


@dataclass(frozen=True)
class MigDevice:
    """One MIG device (a GPU instance with its compute instance) carved out of a GPU."""

    parent: int  # the GPU's index
    uuid: str
    gi_slices: int  # gpuInstanceSliceCount
    ci_slices: int  # computeInstanceSliceCount
    memory_mib: int  # memorySizeMB
    multiprocessors: int = 0
    start: int = 0  # placement: first memory slice
    size: int = 0  # placement: memory slices taken


@dataclass(frozen=True)
class MigState:
    """A GPU's MIG mode and devices; `capable` False on GPUs without MIG (the query fails)."""

    capable: bool = False
    enabled: bool = False
    devices: tuple[MigDevice, ...] = ()


@dataclass(frozen=True)
class PairTopology:
    """How GPUs `a` < `b` reach each other.

    `nvlinks` counts the active NVLink links joining them: direct links, or for switch-attached
    GPUs the links each has into the NVSwitch fabric (the smaller of the two), as `nvidia-smi topo`
    shows `NV18` on an HGX H100. `via_switch` says the links end on an NVSwitch.
    """

    a: int
    b: int
    nvlinks: int = 0
    via_switch: bool = False
    p2p_nvlink: bool = False
    pcie: PcieLevel = PcieLevel.UNKNOWN

    @property
    def over_nvlink(self) -> bool:
        return self.nvlinks > 0 or self.p2p_nvlink


@dataclass(frozen=True)
class GpuProcess:
    """A compute process on a GPU, as NVML lists it; `None`: NVML would not say."""

    pid: int
    memory_used_bytes: int | None = None
    sm_percent: int | None = None
    """Its share of the GPU's streaming multiprocessors in NVML's latest sample."""


@dataclass(frozen=True)
class GpuSample:
    """One pass of health and telemetry for one GPU; `None`: the GPU does not support the query."""

    index: int
    uuid: str
    ecc_sbe_volatile: int | None = None
    ecc_dbe_volatile: int | None = None
    retired_pages_pending: bool | None = None
    row_remap_pending: bool | None = None
    row_remap_failure: bool | None = None
    temperature_c: float | None = None
    power_w: float | None = None
    utilization_ratio: float | None = None
    memory_utilization_ratio: float | None = None
    memory_used_bytes: int | None = None
    memory_free_bytes: int | None = None
    processes: tuple[GpuProcess, ...] = ()
    """Running compute processes (empty where the driver lists none or will not say); they
    never count toward health."""


class EventKind(enum.StrEnum):
    XID = "xid"
    DOUBLE_BIT_ECC = "dbe"


@dataclass(frozen=True)
class GpuEvent:
    """An NVML event; `xid` is set for XID events. The shell stamps the time it saw it."""

    uuid: str
    kind: EventKind
    xid: int | None = None


@dataclass(frozen=True)
class NvmlUnavailable:
    """NVML cannot be opened here (no driver, no library, no GPU): a status, not a crash."""

    reason: str


class GpuNotAnswering(Exception):
    """The GPU is lost or every query to it fails: the health logic marks it unhealthy."""

    def __init__(self, index: int, detail: str) -> None:
        super().__init__(f"GPU {index} is not answering: {detail}")
        self.index = index
        self.detail = detail


@runtime_checkable
class GpuReader(Protocol):
    """Blocking, narrow access to a node's GPUs.

    `open` returns `None` when ready, or `NvmlUnavailable`. An unsupported query on one GPU shows
    up as `None` in its data, never as an exception; `sample` raises `GpuNotAnswering` for a GPU
    that is gone. `wait_events` blocks up to `timeout_s` and returns what arrived (maybe nothing).
    """

    def open(self) -> NvmlUnavailable | None: ...

    def close(self) -> None: ...

    def device_count(self) -> int: ...

    def device(self, index: int) -> GpuInfo: ...

    def pair(self, a: int, b: int) -> PairTopology: ...

    def sample(self, index: int) -> GpuSample: ...

    def mig(self, index: int) -> MigState: ...

    def wait_events(self, timeout_s: float) -> list[GpuEvent]: ...
