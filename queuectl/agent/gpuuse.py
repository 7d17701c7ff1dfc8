"""Which container holds which GPU, and how much it uses it: the kubelet's devices joined with
NVML's samples, as dcgm-exporter joins them. Pure.

Attribution is by device: the kubelet's PodResources API says which GPU UUIDs each container
was given, and a GPU's utilization and memory are the container's. NVML's process IDs are not
used to pick a container: they are host PIDs, and mapping them to containers needs the host's
/proc and cgroups, which the agent does not read. The processes are reported with the GPU
(count and their memory), so a GPU held by a container but running nothing shows as such.
A GPU held by several containers (shared) gives each the whole GPU's figures.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from queuectl.agent.reader import GpuInfo, GpuSample
from queuectl.api import names
from queuectl.api.gpuuse import ContainerUse, UseReport


@dataclass(frozen=True)
class ContainerDevices:
    """One container's devices of one resource, as the kubelet's List answers."""

    namespace: str
    pod: str
    container: str
    resource: str
    device_ids: tuple[str, ...]


@dataclass(frozen=True)
class GpuUse:
    """One GPU and who holds it: `pod` empty for a GPU no container holds."""

    index: int
    uuid: str
    namespace: str = ""
    pod: str = ""
    container: str = ""
    utilization_ratio: float | None = None
    memory_used_bytes: int | None = None
    processes: int = 0

    @property
    def held(self) -> bool:
        return bool(self.pod)


def device_uuid(device_id: str) -> str:
    """The GPU a device ID names: a shared replica (`GPU-...::2`, NVIDIA's time-slicing IDs)
    names its GPU's UUID."""
    return device_id.split("::", 1)[0]


def join(
    containers: Iterable[ContainerDevices],
    gpus: Sequence[GpuInfo],
    samples: Mapping[str, GpuSample],
    resource: str = names.GPU_RESOURCE,
) -> list[GpuUse]:
    """A row per (GPU, container holding it), and one per GPU nobody holds, in GPU order.

    Devices of other resources, and IDs that name no GPU of this node, are left out."""
    by_uuid = {g.uuid: g for g in gpus}
    holders: dict[str, list[ContainerDevices]] = {}
    for c in containers:
        if c.resource != resource:
            continue
        for uuid in dict.fromkeys(device_uuid(d) for d in c.device_ids):
            if uuid in by_uuid:
                holders.setdefault(uuid, []).append(c)
    rows = []
    for gpu in sorted(gpus, key=lambda g: g.index):
        sample = samples.get(gpu.uuid)
        util = sample.utilization_ratio if sample else None
        memory = sample.memory_used_bytes if sample else None
        processes = len(sample.processes) if sample else 0
        held = holders.get(gpu.uuid) or []
        if not held:
            rows.append(GpuUse(gpu.index, gpu.uuid, "", "", "", util, memory, processes))
        for c in held:
            rows.append(
                GpuUse(
                    gpu.index, gpu.uuid, c.namespace, c.pod, c.container, util, memory, processes
                )
            )
    return rows


@dataclass
class _Tally:
    gpus: dict[str, None] = field(default_factory=dict)  # ordered set
    utilization_sum: float = 0.0
    samples: int = 0
    memory_peak: int = 0


class UseWindow:
    """Each pass's rows folded into one report per window: per container, the mean
    utilization of its GPUs over the window and the most memory they held at once.

    A GPU whose utilization NVML would not give in a pass adds nothing to that pass's mean."""

    def __init__(self, start: float) -> None:
        self.start = start
        self._tally: dict[tuple[str, str, str], _Tally] = {}

    def add(self, rows: Iterable[GpuUse]) -> None:
        memory: dict[tuple[str, str, str], int] = {}
        for row in rows:
            if not row.held:
                continue
            key = (row.namespace, row.pod, row.container)
            tally = self._tally.setdefault(key, _Tally())
            tally.gpus[row.uuid] = None
            if row.utilization_ratio is not None:
                tally.utilization_sum += row.utilization_ratio * 100.0
                tally.samples += 1
            memory[key] = memory.get(key, 0) + (row.memory_used_bytes or 0)
        for key, used in memory.items():
            self._tally[key].memory_peak = max(self._tally[key].memory_peak, used)

    def close(self, end: float) -> UseReport:
        """The window's report; the next window starts at `end`."""
        containers = tuple(
            ContainerUse(
                ns,
                pod,
                container,
                tuple(t.gpus),
                t.utilization_sum / t.samples if t.samples else 0.0,
                t.memory_peak,
            )
            for (ns, pod, container), t in sorted(self._tally.items())
        )
        report = UseReport(self.start, end, containers)
        self.start, self._tally = end, {}
        return report
