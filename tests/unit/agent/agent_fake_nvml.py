"""A stand-in for the pynvml module: a small made-up node behind the same functions, so the real
reader's per-call error handling runs without a GPU. Constants and NVMLError are pynvml's."""

from __future__ import annotations

from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import pynvml


@dataclass
class FakeGpu:
    name: str = "NVIDIA H100 80GB HBM3"
    uuid: str = "GPU-0"
    bus_id: str = "00000000:18:00.0"
    total: int = 81559 * 1024 * 1024
    cc: tuple[int, int] = (9, 0)
    nvlink_remotes: list[str] = field(default_factory=list)
    unsupported: set[str] = field(default_factory=set)  # function names answering NOT_SUPPORTED
    lost: bool = False
    temperature: int = 45
    dbe: int = 0
    remap_pending: int = 0


class FakeNvml:
    """Looks like `pynvml` to `NvmlReader`."""

    def __init__(self, gpus: list[FakeGpu], *, init_error: int | None = None) -> None:
        self.gpus = gpus
        self.init_error = init_error
        self.events: list[tuple[int, int, int]] = []  # (gpu index or -1 for unknown, type, data)
        self.shutdown_called = False

    def __getattr__(self, name: str) -> Any:
        return getattr(pynvml, name)  # constants, NVMLError, structure types

    def _gpu(self, handle: int, fn: str) -> FakeGpu:
        gpu = self.gpus[handle]
        if gpu.lost:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_GPU_IS_LOST)
        if fn in gpu.unsupported:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_SUPPORTED)
        return gpu

    def nvmlInit(self) -> None:
        if self.init_error is not None:
            raise pynvml.NVMLError(self.init_error)

    def nvmlShutdown(self) -> None:
        self.shutdown_called = True

    def nvmlDeviceGetMigMode(self, h: int) -> list[int]:
        self._gpu(h, "nvmlDeviceGetMigMode")
        raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_SUPPORTED)  # these GPUs have no MIG

    def nvmlDeviceGetCount(self) -> int:
        return len(self.gpus)

    def nvmlDeviceGetHandleByIndex(self, index: int) -> int:
        return index

    def nvmlDeviceGetName(self, h: int) -> str:
        return self._gpu(h, "name").name

    def nvmlDeviceGetUUID(self, h: int) -> str:
        if h < 0:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        return self._gpu(h, "uuid").uuid

    def nvmlDeviceGetPciInfo(self, h: int) -> Any:
        return SimpleNamespace(busId=self._gpu(h, "pci").bus_id.encode())

    def nvmlDeviceGetMemoryInfo(self, h: int) -> Any:
        gpu = self._gpu(h, "memory")
        return SimpleNamespace(total=gpu.total, used=1024, free=gpu.total - 1024)

    def nvmlDeviceGetCudaComputeCapability(self, h: int) -> tuple[int, int]:
        return self._gpu(h, "cc").cc

    def nvmlDeviceGetGpuFabricInfoV(self, h: int, info: Any) -> None:
        self._gpu(h, "fabric")
        raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_SUPPORTED)

    def nvmlDeviceGetNvLinkState(self, h: int, link: int) -> int:
        gpu = self._gpu(h, "nvlink")
        if link >= len(gpu.nvlink_remotes):
            raise pynvml.NVMLError(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        return int(pynvml.NVML_FEATURE_ENABLED)

    def nvmlDeviceGetNvLinkRemotePciInfo(self, h: int, link: int) -> Any:
        return SimpleNamespace(busId=self._gpu(h, "nvlink").nvlink_remotes[link])

    def nvmlDeviceGetTopologyCommonAncestor(self, a: int, b: int) -> int:
        return int(pynvml.NVML_TOPOLOGY_SYSTEM)

    def nvmlDeviceGetP2PStatus(self, a: int, b: int, index: int) -> int:
        linked = any(r.upper() == self.gpus[b].bus_id for r in self.gpus[a].nvlink_remotes)
        return int(pynvml.NVML_P2P_STATUS_OK if linked else pynvml.NVML_P2P_STATUS_NOT_SUPPORTED)

    def nvmlDeviceGetTotalEccErrors(self, h: int, kind: int, counter: int) -> int:
        gpu = self._gpu(h, "ecc")
        return gpu.dbe if kind == pynvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED else 3

    def nvmlDeviceGetRetiredPagesPendingStatus(self, h: int) -> int:
        self._gpu(h, "retired")
        return int(pynvml.NVML_FEATURE_DISABLED)

    def nvmlDeviceGetRemappedRows(self, h: int) -> tuple[int, int, int, int]:
        return (0, 0, self._gpu(h, "remap").remap_pending, 0)

    def nvmlDeviceGetTemperature(self, h: int, sensor: int) -> int:
        return self._gpu(h, "temperature").temperature

    def nvmlDeviceGetPowerUsage(self, h: int) -> int:
        self._gpu(h, "power")
        return 350_500

    def nvmlDeviceGetUtilizationRates(self, h: int) -> Any:
        self._gpu(h, "util")
        return SimpleNamespace(gpu=87, memory=40)

    def nvmlEventSetCreate(self) -> str:
        return "event-set"

    def nvmlEventSetFree(self, event_set: str) -> None:
        pass

    def nvmlDeviceGetSupportedEventTypes(self, h: int) -> int:
        return int(pynvml.nvmlEventTypeXidCriticalError | pynvml.nvmlEventTypeDoubleBitEccError)

    def nvmlDeviceRegisterEvents(self, h: int, types: int, event_set: str) -> None:
        self._gpu(h, "events")

    def nvmlEventSetWait_v2(self, event_set: str, timeout_ms: int) -> Any:
        if not self.events:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_TIMEOUT)
        gpu, kind, data = self.events.pop(0)
        return SimpleNamespace(device=gpu, eventType=kind, eventData=data)
