"""A scripted `GpuReader`: a made-up node whose GPUs misbehave on cue.

Tests (and `queuectl agent --scripted scenario.yaml`) describe a node and a timeline: an XID 79 on
GPU 3 at t=10, a double-bit ECC error, a temperature spike, a GPU that stops answering or hangs.
Time comes from an injected clock, so a scenario replays exactly.
"""

from __future__ import annotations

import threading
import time
import uuid as uuidlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from itertools import combinations
from typing import Any

from queuectl.agent.reader import (
    EventKind,
    FabricInfo,
    GpuEvent,
    GpuInfo,
    GpuNotAnswering,
    GpuSample,
    MigDevice,
    MigState,
    NvmlUnavailable,
    PairTopology,
    PcieLevel,
)
from queuectl.api import gpushare

MIB = 1024 * 1024

# name, memory MiB, compute capability, NVLink links per GPU (into the switch / to each peer).
MODELS: dict[str, tuple[str, int, tuple[int, int], int]] = {
    "H100": ("NVIDIA H100 80GB HBM3", 81559, (9, 0), 18),
    "H200": ("NVIDIA H200", 143771, (9, 0), 18),
    "A100": ("NVIDIA A100-SXM4-80GB", 81920, (8, 0), 12),
    "L40S": ("NVIDIA L40S", 46068, (8, 9), 0),
    "B200": ("NVIDIA B200", 183359, (10, 0), 18),
}


def mig_states(gpus: list[GpuInfo], layouts: Mapping[int, str], seed: str) -> list[MigState]:
    """MIG devices per GPU from layout names (`all-1g.10gb`, `3g.40gb+2g.20gb`); GPUs without a
    layout are MIG-capable but disabled (every model here but L40S is MIG-capable)."""
    out = []
    for gpu in gpus:
        capable = not gpu.name.endswith("L40S")
        spec = layouts.get(gpu.index)
        if spec is None or not capable:
            out.append(MigState(capable=capable))
            continue
        total_mib = gpu.memory_total_bytes // MIB
        total_gb = -(-gpu.memory_total_bytes // (1024 * MIB))
        devices, start = [], 0
        for i, profile in enumerate(gpushare.parse_layout(spec, total_gb)):
            slices, size = gpushare.parse_profile(profile, total_gb)
            devices.append(
                MigDevice(
                    parent=gpu.index,
                    uuid=f"MIG-{uuidlib.uuid5(uuidlib.NAMESPACE_DNS, f'{seed}/{gpu.index}/{i}')}",
                    gi_slices=slices,
                    ci_slices=slices,
                    memory_mib=int(total_mib * size / 8 * 0.985),
                    multiprocessors=slices * 16,
                    start=start,
                    size=size,
                )
            )
            start += size
        out.append(MigState(capable=True, enabled=True, devices=tuple(devices)))
    return out


class ManualClock:
    """A clock a test moves by hand."""

    def __init__(self, start: float = 1_700_000_000.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> float:
        self.now += seconds
        return self.now


def gpu_uuid(seed: str, index: int) -> str:
    return f"GPU-{uuidlib.uuid5(uuidlib.NAMESPACE_DNS, f'{seed}/{index}')}"


def make_gpus(
    model: str, count: int, seed: str = "node", fabric: FabricInfo | None = None
) -> list[GpuInfo]:
    name, mib, cc, _ = MODELS[model]
    return [
        GpuInfo(
            index=i,
            uuid=gpu_uuid(seed, i),
            name=name,
            memory_total_bytes=mib * MIB,
            pci_bus_id=f"00000000:{0x18 + 0x10 * i:02X}:00.0",
            compute_capability=cc,
            fabric=fabric,
        )
        for i in range(count)
    ]


def make_pairs(topology: str, count: int, links: int = 18) -> list[PairTopology]:
    """Pairs for a named layout: nvswitch, full-mesh, pairs (0-1, 2-3 ...), ring, none."""
    pairs = []
    for a, b in combinations(range(count), 2):
        pcie = PcieLevel.NODE if (a < count // 2) == (b < count // 2) else PcieLevel.SYS
        if topology == "nvswitch":
            pairs.append(PairTopology(a, b, links, via_switch=True, p2p_nvlink=True, pcie=pcie))
        elif (
            topology == "full-mesh"
            or (topology == "pairs" and a // 2 == b // 2 and b == a + 1)
            or (topology == "ring" and (b - a == 1 or (a == 0 and b == count - 1)))
        ):
            pairs.append(PairTopology(a, b, links, p2p_nvlink=True, pcie=pcie))
        elif topology in ("none", "pairs", "ring", "full-mesh"):
            pairs.append(PairTopology(a, b, pcie=pcie))
        else:
            raise ValueError(f"unknown topology {topology!r}")
    return pairs


@dataclass
class _Gpu:
    info: GpuInfo
    sample: GpuSample
    answering: bool = True
    hang: bool = False


@dataclass(order=True)
class _Step:
    at: float
    seq: int
    apply: Callable[[], None] = field(compare=False)


class ScriptedReader:
    """A `GpuReader` over made-up GPUs and a timeline of faults."""

    def __init__(
        self,
        gpus: list[GpuInfo],
        pairs: list[PairTopology],
        clock: Callable[[], float],
        *,
        unavailable: str | None = None,
        temperature_c: float = 40.0,
    ) -> None:
        self._clock = clock
        self._gpus = [
            _Gpu(
                g,
                GpuSample(
                    index=g.index,
                    uuid=g.uuid,
                    ecc_sbe_volatile=0,
                    ecc_dbe_volatile=0,
                    retired_pages_pending=False,
                    row_remap_pending=False,
                    row_remap_failure=False,
                    temperature_c=temperature_c,
                    power_w=120.0,
                    utilization_ratio=0.0,
                    memory_utilization_ratio=0.0,
                    memory_used_bytes=0,
                    memory_free_bytes=g.memory_total_bytes,
                ),
            )
            for g in gpus
        ]
        self._pairs = {(p.a, p.b): p for p in pairs}
        self._mig = [MigState(capable=not g.name.endswith("L40S")) for g in gpus]
        self._unavailable = unavailable
        self._steps: list[_Step] = []
        self._events: list[GpuEvent] = []
        self._lock = threading.Lock()
        self._release = threading.Event()
        self.opened = False

    @classmethod
    def node(
        cls,
        model: str = "H100",
        count: int = 8,
        topology: str = "nvswitch",
        *,
        clock: Callable[[], float],
        seed: str = "node",
        fabric: FabricInfo | None = None,
        unavailable: str | None = None,
        mig: str | Mapping[int, str] | None = None,
    ) -> ScriptedReader:
        """`mig`: one layout for every GPU (`all-1g.10gb`) or per GPU index."""
        links = MODELS[model][3]
        gpus = make_gpus(model, count, seed, fabric)
        reader = cls(gpus, make_pairs(topology, count, links), clock, unavailable=unavailable)
        if mig is not None:
            layouts = dict.fromkeys(range(count), mig) if isinstance(mig, str) else dict(mig)
            reader._mig = mig_states(gpus, {int(k): str(v) for k, v in layouts.items()}, seed)
        return reader

    @classmethod
    def from_scenario(
        cls, scenario: Mapping[str, Any], clock: Callable[[], float]
    ) -> ScriptedReader:
        """From a mapping (a YAML file): model, count, topology, seed, unavailable, mig (a layout
        for every GPU, or GPU index -> layout), and `timeline`
        entries {at (seconds from now), gpu, one of xid|dbe|temperature|stop|answer|pending}."""
        fabric = scenario.get("fabric")
        reader = cls.node(
            scenario.get("model", "H100"),
            int(scenario.get("count", 8)),
            scenario.get("topology", "nvswitch"),
            clock=clock,
            seed=str(scenario.get("seed", "node")),
            fabric=FabricInfo(str(fabric["cluster"]), int(fabric["clique"])) if fabric else None,
            unavailable=scenario.get("unavailable"),
            mig=scenario.get("mig"),
        )
        start = clock()
        for entry in scenario.get("timeline", []):
            at, gpu = start + float(entry["at"]), int(entry["gpu"])
            if "xid" in entry:
                reader.xid(at, gpu, int(entry["xid"]))
            if entry.get("dbe"):
                reader.dbe(at, gpu)
            if "temperature" in entry:
                reader.temperature(at, gpu, float(entry["temperature"]))
            if entry.get("stop"):
                reader.stop_answering(at, gpu)
            if entry.get("answer"):
                reader.answer_again(at, gpu)
            if "pending" in entry:
                reader.pending_pages(at, gpu, bool(entry["pending"]))
        return reader

    # --- the timeline ----------------------------------------------------------------------
    def _at(self, at: float, apply: Callable[[], None]) -> None:
        with self._lock:
            self._steps.append(_Step(at, len(self._steps), apply))
            self._steps.sort()

    def _update(self, gpu: int, **changes: Any) -> None:
        self._gpus[gpu].sample = replace(self._gpus[gpu].sample, **changes)

    def _emit(self, gpu: int, kind: EventKind, xid: int | None = None) -> None:
        self._events.append(GpuEvent(self._gpus[gpu].info.uuid, kind, xid))

    def xid(self, at: float, gpu: int, xid: int) -> None:
        self._at(at, lambda: self._emit(gpu, EventKind.XID, xid))

    def dbe(self, at: float, gpu: int) -> None:
        """A double-bit ECC error: the volatile count goes up and an event fires."""

        def apply() -> None:
            self._update(gpu, ecc_dbe_volatile=(self._gpus[gpu].sample.ecc_dbe_volatile or 0) + 1)
            self._emit(gpu, EventKind.DOUBLE_BIT_ECC)

        self._at(at, apply)

    def temperature(self, at: float, gpu: int, celsius: float) -> None:
        self._at(at, lambda: self._update(gpu, temperature_c=celsius))

    def utilization(self, at: float, gpu: int, percent: float) -> None:
        """From `at`, the GPU reads `percent` busy (a job working, or idling)."""
        self._at(at, lambda: self._update(gpu, utilization_ratio=percent / 100.0))

    def pending_pages(self, at: float, gpu: int, pending: bool = True) -> None:
        self._at(at, lambda: self._update(gpu, retired_pages_pending=pending))

    def stop_answering(self, at: float, gpu: int) -> None:
        self._at(at, lambda: setattr(self._gpus[gpu], "answering", False))

    def answer_again(self, at: float, gpu: int) -> None:
        self._at(at, lambda: setattr(self._gpus[gpu], "answering", True))

    def hang(self, at: float, gpu: int) -> None:
        """From `at`, sampling this GPU blocks until `release()` (a wedged driver call)."""
        self._at(at, lambda: setattr(self._gpus[gpu], "hang", True))

    def release(self) -> None:
        self._release.set()

    def _advance(self) -> None:
        now = self._clock()
        with self._lock:
            due = [s for s in self._steps if s.at <= now]
            self._steps = [s for s in self._steps if s.at > now]
            for step in due:
                step.apply()

    # --- GpuReader -------------------------------------------------------------------------
    def open(self) -> NvmlUnavailable | None:
        if self._unavailable is not None:
            return NvmlUnavailable(self._unavailable)
        self.opened = True
        return None

    def close(self) -> None:
        self.opened = False
        self._release.set()

    def device_count(self) -> int:
        return len(self._gpus)

    def uuids(self) -> list[str]:
        """The GPUs' UUIDs by index: what the NVML emulator reports for the same scenario file,
        so a test knows the devices a real kubelet will hand out."""
        return [self.device(i).uuid for i in range(self.device_count())]

    def device(self, index: int) -> GpuInfo:
        self._advance()
        gpu = self._gpus[index]
        if not gpu.answering:
            raise GpuNotAnswering(index, "GPU is lost")
        return gpu.info

    def pair(self, a: int, b: int) -> PairTopology:
        return self._pairs.get((min(a, b), max(a, b)), PairTopology(min(a, b), max(a, b)))

    def sample(self, index: int) -> GpuSample:
        self._advance()
        gpu = self._gpus[index]
        if gpu.hang:
            self._release.wait()
        if not gpu.answering:
            raise GpuNotAnswering(index, "GPU is lost")
        return gpu.sample

    def mig(self, index: int) -> MigState:
        self._advance()
        if not self._gpus[index].answering:
            raise GpuNotAnswering(index, "GPU is lost")
        return self._mig[index]

    def wait_events(self, timeout_s: float) -> list[GpuEvent]:
        """Events already due; never sleeps on a manual clock (sleeps `timeout_s` if none and the
        clock is real time, so a live loop is paced like NVML's wait)."""
        self._advance()
        with self._lock:
            events, self._events = self._events, []
        if not events and self._clock is time.time:
            time.sleep(timeout_s)
        return events
