"""The real `GpuReader`, over NVML through nvidia-ml-py (`import pynvml`).

Each query is its own try: an unsupported or failing query on one GPU leaves that field `None`
and the pass goes on. "GPU is lost", or a GPU whose every query fails, raises `GpuNotAnswering`.
A node without the library, driver or GPUs gets `NvmlUnavailable` from `open`, never an exception.
All of it blocks; the shell runs it on its NVML thread.
"""

from __future__ import annotations

import ctypes
import functools
import importlib
import logging
import uuid as uuidlib
from collections.abc import Callable
from typing import Any, TypeVar

from queuectl.agent.reader import (
    EventKind,
    FabricInfo,
    GpuEvent,
    GpuInfo,
    GpuNotAnswering,
    GpuProcess,
    GpuSample,
    MigDevice,
    MigState,
    NvmlUnavailable,
    PairTopology,
    PcieLevel,
)

log = logging.getLogger(__name__)
T = TypeVar("T")

_PCIE_LEVELS = {
    0: PcieLevel.BOARD,
    10: PcieLevel.PIX,
    20: PcieLevel.PXB,
    30: PcieLevel.PHB,
    40: PcieLevel.NODE,
    50: PcieLevel.SYS,
}


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _cc(value: Any) -> tuple[int, int]:
    major, minor = value
    return int(major), int(minor)


def normalize_bus_id(bus_id: Any) -> str:
    """One spelling for a PCI bus id ('0000:18:00.0' and '00000000:18:00.0' are the same GPU)."""
    text = _text(bus_id).strip().upper()
    parts = text.split(":")
    if len(parts) == 3:
        try:
            return f"{int(parts[0], 16):08X}:{parts[1]}:{parts[2]}"
        except ValueError:
            return text
    return text


class _Unsupported(Exception):
    """A query this GPU cannot answer (internal: becomes a `None` field)."""


class NvmlReader:
    """`GpuReader` over pynvml. `nvml` may be injected (tests pass a fake module)."""

    def __init__(self, nvml: Any | None = None) -> None:
        self._nvml: Any = nvml
        self._handles: list[Any] = []
        self._bus_ids: list[str] = []
        self._uuids: list[str] = []
        self._links: dict[int, list[str]] = {}
        self._event_set: Any = None
        self._initialized = False

    # --- lifecycle -------------------------------------------------------------------------
    def open(self) -> NvmlUnavailable | None:
        if self._nvml is None:
            try:
                self._nvml = importlib.import_module("pynvml")
            except ImportError as exc:
                return NvmlUnavailable(f"nvidia-ml-py is not installed: {exc}")
        nv = self._nvml
        try:
            nv.nvmlInit()
        except nv.NVMLError as exc:
            return NvmlUnavailable(f"NVML cannot be initialized: {exc}")
        except OSError as exc:  # a broken libnvidia-ml.so
            return NvmlUnavailable(f"NVML cannot be loaded: {exc}")
        self._initialized = True
        try:
            count = int(nv.nvmlDeviceGetCount())
        except nv.NVMLError as exc:
            self.close()
            return NvmlUnavailable(f"NVML cannot count GPUs: {exc}")
        if count == 0:
            self.close()
            return NvmlUnavailable("NVML reports no GPUs on this node")
        self._handles = []
        for index in range(count):
            try:
                self._handles.append(nv.nvmlDeviceGetHandleByIndex(index))
            except nv.NVMLError as exc:
                log.warning("GPU %d has no NVML handle: %s", index, exc)
                self._handles.append(None)
        self._bus_ids = [self._bus_id(h) for h in self._handles]
        self._uuids = [self._uuid(h) for h in self._handles]
        self._links = {}
        self._register_events()
        return None

    def _bus_id(self, handle: Any) -> str:
        if handle is None:
            return ""
        return self._try(
            lambda: normalize_bus_id(self._nvml.nvmlDeviceGetPciInfo(handle).busId), ""
        )

    def _uuid(self, handle: Any) -> str:
        if handle is None:
            return ""
        return self._try(lambda: _text(self._nvml.nvmlDeviceGetUUID(handle)), "")

    def close(self) -> None:
        nv = self._nvml
        if nv is None or not self._initialized:
            return
        if self._event_set is not None:
            self._try(lambda: nv.nvmlEventSetFree(self._event_set), None)
            self._event_set = None
        self._try(nv.nvmlShutdown, None)
        self._initialized = False

    def _register_events(self) -> None:
        nv = self._nvml
        wanted = nv.nvmlEventTypeXidCriticalError | nv.nvmlEventTypeDoubleBitEccError
        try:
            self._event_set = nv.nvmlEventSetCreate()
        except nv.NVMLError as exc:
            log.warning("NVML events are not available, XIDs will not be seen: %s", exc)
            return
        for index, handle in enumerate(self._handles):
            if handle is None:
                continue
            try:
                supported = int(nv.nvmlDeviceGetSupportedEventTypes(handle))
                nv.nvmlDeviceRegisterEvents(handle, wanted & supported, self._event_set)
            except nv.NVMLError as exc:
                log.warning("GPU %d: cannot register NVML events: %s", index, exc)

    # --- per-call error handling ------------------------------------------------------------
    def _try(self, call: Callable[[], T], default: T) -> T:
        try:
            return call()
        except self._nvml.NVMLError:
            return default

    def _query(self, index: int, call: Callable[[], T]) -> T:
        """Run one query: `GpuNotAnswering` if the GPU is lost, `_Unsupported` on other errors."""
        nv = self._nvml
        try:
            return call()
        except nv.NVMLError as exc:
            if exc.value in (nv.NVML_ERROR_GPU_IS_LOST, nv.NVML_ERROR_UNINITIALIZED):
                raise GpuNotAnswering(index, str(exc)) from exc
            raise _Unsupported(str(exc)) from exc

    def _handle(self, index: int) -> Any:
        handle = self._handles[index] if index < len(self._handles) else None
        if handle is None:
            raise GpuNotAnswering(index, "no NVML handle")
        return handle

    # --- GpuReader -------------------------------------------------------------------------
    def device_count(self) -> int:
        return len(self._handles)

    def device(self, index: int) -> GpuInfo:
        nv, h = self._nvml, self._handle(index)
        try:
            name = _text(self._query(index, lambda: nv.nvmlDeviceGetName(h)))
            uuid = _text(self._query(index, lambda: nv.nvmlDeviceGetUUID(h)))
        except _Unsupported as exc:
            raise GpuNotAnswering(index, f"no name or UUID: {exc}") from exc
        return GpuInfo(
            index=index,
            uuid=uuid,
            name=name,
            memory_total_bytes=self._optional(
                index, lambda: int(nv.nvmlDeviceGetMemoryInfo(h).total)
            )
            or 0,
            pci_bus_id=self._bus_ids[index],
            compute_capability=self._optional(
                index, lambda: _cc(nv.nvmlDeviceGetCudaComputeCapability(h))
            ),
            fabric=self._optional(index, lambda: self._fabric(h)),
        )

    def _optional(self, index: int, call: Callable[[], T]) -> T | None:
        try:
            return self._query(index, call)
        except _Unsupported:
            return None

    def _fabric(self, handle: Any) -> FabricInfo | None:
        nv = self._nvml
        info = nv.c_nvmlGpuFabricInfoV_t()
        # By reference: pynvml hands the argument to C as given, and a structure passes by value.
        nv.nvmlDeviceGetGpuFabricInfoV(handle, ctypes.byref(info))
        if info.state != nv.NVML_GPU_FABRIC_STATE_COMPLETED or info.status != nv.NVML_SUCCESS:
            return None
        raw = bytes(info.clusterUuid)
        if not any(raw):
            return None
        return FabricInfo(str(uuidlib.UUID(bytes=raw)), int(info.cliqueId))

    def _remote_links(self, index: int) -> list[str]:
        """Bus ids at the far end of each active NVLink of a GPU (cached: links do not move)."""
        if index in self._links:
            return self._links[index]
        nv, h = self._nvml, self._handle(index)
        remotes: list[str] = []
        for link in range(int(nv.NVML_NVLINK_MAX_LINKS)):
            try:
                if nv.nvmlDeviceGetNvLinkState(h, link) != nv.NVML_FEATURE_ENABLED:
                    continue
                remotes.append(normalize_bus_id(nv.nvmlDeviceGetNvLinkRemotePciInfo(h, link).busId))
            except nv.NVMLError:
                continue
        self._links[index] = remotes
        return remotes

    def pair(self, a: int, b: int) -> PairTopology:
        a, b = min(a, b), max(a, b)
        nv = self._nvml
        try:
            ha, hb = self._handle(a), self._handle(b)
        except GpuNotAnswering:
            return PairTopology(a, b)
        level = self._try(lambda: int(nv.nvmlDeviceGetTopologyCommonAncestor(ha, hb)), -1)
        p2p = self._try(
            lambda: (
                nv.nvmlDeviceGetP2PStatus(ha, hb, nv.NVML_P2P_CAPS_INDEX_NVLINK)
                == nv.NVML_P2P_STATUS_OK
            ),
            False,
        )
        links_a, links_b = self._remote_links(a), self._remote_links(b)
        direct = sum(1 for r in links_a if r == self._bus_ids[b])
        gpus = set(self._bus_ids)
        switch_a = sum(1 for r in links_a if r not in gpus)
        switch_b = sum(1 for r in links_b if r not in gpus)
        via_switch = direct == 0 and switch_a > 0 and switch_b > 0
        return PairTopology(
            a,
            b,
            nvlinks=direct or (min(switch_a, switch_b) if via_switch else 0),
            via_switch=via_switch,
            p2p_nvlink=bool(p2p),
            pcie=_PCIE_LEVELS.get(level, PcieLevel.UNKNOWN),
        )

    def sample(self, index: int) -> GpuSample:
        nv, h = self._nvml, self._handle(index)
        uuid = self._try(lambda: _text(nv.nvmlDeviceGetUUID(h)), "")
        answered = 0
        failed = 0

        def get(call: Callable[[], T]) -> T | None:
            nonlocal answered, failed
            try:
                value = self._query(index, call)
            except _Unsupported:
                failed += 1
                return None
            answered += 1
            return value

        def ecc(kind: int) -> int:
            return int(nv.nvmlDeviceGetTotalEccErrors(h, kind, nv.NVML_VOLATILE_ECC))

        remap = get(lambda: tuple(nv.nvmlDeviceGetRemappedRows(h)))
        memory = get(lambda: nv.nvmlDeviceGetMemoryInfo(h))
        util = get(lambda: nv.nvmlDeviceGetUtilizationRates(h))
        power_mw = get(lambda: float(nv.nvmlDeviceGetPowerUsage(h)))
        pending = get(lambda: int(nv.nvmlDeviceGetRetiredPagesPendingStatus(h)))
        result = GpuSample(
            index=index,
            uuid=uuid,
            ecc_sbe_volatile=get(lambda: ecc(nv.NVML_MEMORY_ERROR_TYPE_CORRECTED)),
            ecc_dbe_volatile=get(lambda: ecc(nv.NVML_MEMORY_ERROR_TYPE_UNCORRECTED)),
            retired_pages_pending=None if pending is None else pending == nv.NVML_FEATURE_ENABLED,
            row_remap_pending=None if remap is None else bool(remap[2]),
            row_remap_failure=None if remap is None else bool(remap[3]),
            temperature_c=get(
                lambda: float(nv.nvmlDeviceGetTemperature(h, nv.NVML_TEMPERATURE_GPU))
            ),
            power_w=None if power_mw is None else power_mw / 1000.0,
            utilization_ratio=None if util is None else util.gpu / 100.0,
            memory_utilization_ratio=None if util is None else util.memory / 100.0,
            memory_used_bytes=None if memory is None else int(memory.used),
            memory_free_bytes=None if memory is None else int(memory.free),
            processes=self._processes(h),
        )
        if answered == 0 or not uuid:
            raise GpuNotAnswering(index, f"none of {failed} queries answered")
        return result

    def _processes(self, handle: Any) -> tuple[GpuProcess, ...]:
        """Running compute processes with their memory and latest SM share (what
        dcgm-exporter joins with the kubelet's devices); a query the GPU refuses (MIG mode,
        an old driver) leaves that part out."""
        nv = self._nvml
        running: list[Any] = self._try(
            lambda: list(nv.nvmlDeviceGetComputeRunningProcesses(handle)), []
        )
        samples: list[Any] = self._try(
            lambda: list(nv.nvmlDeviceGetProcessUtilization(handle, 0)), []
        )
        latest: dict[int, tuple[int, int]] = {}  # pid -> (timestamp, sm %)
        for s in samples:
            pid, stamp = int(s.pid), int(s.timeStamp)
            if pid not in latest or stamp >= latest[pid][0]:
                latest[pid] = (stamp, int(s.smUtil))
        out = []
        for p in running:
            used = p.usedGpuMemory
            sm = latest.get(int(p.pid))
            out.append(
                GpuProcess(
                    int(p.pid),
                    None if used is None else int(used),
                    None if sm is None else sm[1],
                )
            )
        return tuple(out)

    def mig(self, index: int) -> MigState:
        """MIG mode and devices: each device's slices and memory from its attributes, its
        placement from its GPU instance (left 0/0 where the driver will not say)."""
        nv, h = self._nvml, self._handle(index)
        try:
            current, _pending = self._query(index, lambda: nv.nvmlDeviceGetMigMode(h))
        except _Unsupported:
            return MigState()  # not a MIG-capable GPU
        if current != nv.NVML_DEVICE_MIG_ENABLE:
            return MigState(capable=True)
        devices: list[MigDevice] = []
        slots = self._try(lambda: int(nv.nvmlDeviceGetMaxMigDeviceCount(h)), 0)
        for slot in range(slots):
            try:
                mh = nv.nvmlDeviceGetMigDeviceHandleByIndex(h, slot)
                attrs = nv.nvmlDeviceGetAttributes(mh)
                uuid = _text(nv.nvmlDeviceGetUUID(mh))
            except nv.NVMLError:
                continue  # an empty slot answers NOT_FOUND
            start, size = self._try(functools.partial(self._placement, h, mh), (0, 0))
            devices.append(
                MigDevice(
                    parent=index,
                    uuid=uuid,
                    gi_slices=int(attrs.gpuInstanceSliceCount),
                    ci_slices=int(attrs.computeInstanceSliceCount),
                    memory_mib=int(attrs.memorySizeMB),
                    multiprocessors=int(attrs.multiprocessorCount),
                    start=start,
                    size=size,
                )
            )
        return MigState(capable=True, enabled=True, devices=tuple(devices))

    def _placement(self, handle: Any, mig_handle: Any) -> tuple[int, int]:
        nv = self._nvml
        instance = nv.nvmlDeviceGetGpuInstanceById(
            handle, nv.nvmlDeviceGetGpuInstanceId(mig_handle)
        )
        placement = nv.nvmlGpuInstanceGetInfo(instance).placement
        return int(placement.start), int(placement.size)

    def wait_events(self, timeout_s: float) -> list[GpuEvent]:
        """Block up to `timeout_s` for the first event, then drain what is queued."""
        nv = self._nvml
        if self._event_set is None:
            return []
        events: list[GpuEvent] = []
        timeout_ms = max(0, int(timeout_s * 1000))
        while True:
            try:
                data = nv.nvmlEventSetWait_v2(self._event_set, timeout_ms)
            except nv.NVMLError as exc:
                if exc.value != nv.NVML_ERROR_TIMEOUT:
                    log.warning("waiting for NVML events failed: %s", exc)
                return events
            uuid = self._uuid(data.device)
            # An event whose GPU cannot be told counts against every GPU, as the device plugin does.
            targets = [uuid] if uuid else [u for u in self._uuids if u]
            for target in targets:
                if data.eventType == nv.nvmlEventTypeXidCriticalError:
                    events.append(GpuEvent(target, EventKind.XID, int(data.eventData)))
                elif data.eventType == nv.nvmlEventTypeDoubleBitEccError:
                    events.append(GpuEvent(target, EventKind.DOUBLE_BIT_ECC))
            timeout_ms = 0
