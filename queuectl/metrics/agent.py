"""The node agent's metrics (`AGENT_REGISTRY`, served by `queuectl agent`): per-GPU series as
DCGM exporter names them, and the agent's own work."""

from __future__ import annotations

import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from prometheus_client import CollectorRegistry, Counter, Gauge
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

AGENT_REGISTRY = CollectorRegistry()

# Labels of every per-GPU series, as DCGM exporter's gpu/UUID/modelName/Hostname.
GPU_LABELS = ("node", "gpu", "uuid", "model")


@dataclass(frozen=True)
class GpuMetricSample:
    """One GPU's latest readings; `None` where the GPU does not support the query."""

    node: str
    gpu: int
    uuid: str
    model: str
    healthy: bool
    last_xid: int = 0
    utilization_ratio: float | None = None
    memory_utilization_ratio: float | None = None
    memory_used_bytes: int | None = None
    memory_free_bytes: int | None = None
    temperature_c: float | None = None
    power_w: float | None = None
    ecc_sbe_total: int | None = None
    ecc_dbe_total: int | None = None
    holders: tuple[tuple[str, str, str], ...] | None = None
    """(namespace, pod, container) the kubelet gave the GPU to; None: the kubelet not asked."""


_GAUGES = (
    (
        "queuectl_gpu_utilization_ratio",
        "Fraction of time a kernel ran on the GPU (DCGM_FI_DEV_GPU_UTIL).",
        "utilization_ratio",
    ),
    (
        "queuectl_gpu_memory_utilization_ratio",
        "Fraction of time device memory was read or written (DCGM_FI_DEV_MEM_COPY_UTIL).",
        "memory_utilization_ratio",
    ),
    (
        "queuectl_gpu_memory_used_bytes",
        "Device memory in use (DCGM_FI_DEV_FB_USED).",
        "memory_used_bytes",
    ),
    (
        "queuectl_gpu_memory_free_bytes",
        "Device memory free (DCGM_FI_DEV_FB_FREE).",
        "memory_free_bytes",
    ),
    (
        "queuectl_gpu_temperature_celsius",
        "GPU temperature (DCGM_FI_DEV_GPU_TEMP).",
        "temperature_c",
    ),
    ("queuectl_gpu_power_watts", "GPU power draw (DCGM_FI_DEV_POWER_USAGE).", "power_w"),
)


class GpuCollector(Collector):
    """Per-GPU series from the agent's latest pass. A snapshot replaces the previous one whole,
    so a GPU that disappears leaves no stale series behind."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._samples: tuple[GpuMetricSample, ...] = ()

    def update(self, samples: Sequence[GpuMetricSample]) -> None:
        with self._lock:
            self._samples = tuple(samples)

    def collect(self) -> Iterable[GaugeMetricFamily | CounterMetricFamily]:
        with self._lock:
            samples = self._samples
        for name, doc, attr in _GAUGES:
            family = GaugeMetricFamily(name, doc, labels=GPU_LABELS)
            for s in samples:
                value = getattr(s, attr)
                if value is not None:
                    family.add_metric(_labels(s), float(value))
            yield family
        ecc = CounterMetricFamily(
            "queuectl_gpu_ecc_errors",
            "ECC errors since the driver loaded, by type (DCGM_FI_DEV_ECC_SBE/DBE_VOL_TOTAL).",
            labels=(*GPU_LABELS, "type"),
        )
        xid = GaugeMetricFamily(
            "queuectl_gpu_last_xid",
            "Last XID the GPU raised, 0 if none (DCGM_FI_DEV_XID_ERRORS).",
            labels=GPU_LABELS,
        )
        healthy = GaugeMetricFamily(
            "queuectl_gpu_healthy", "1 if the agent considers the GPU healthy.", labels=GPU_LABELS
        )
        for s in samples:
            for kind, value in (("single", s.ecc_sbe_total), ("double", s.ecc_dbe_total)):
                if value is not None:
                    ecc.add_metric([*_labels(s), kind], float(value))
            xid.add_metric(_labels(s), float(s.last_xid))
            healthy.add_metric(_labels(s), 1.0 if s.healthy else 0.0)
        yield ecc
        yield xid
        yield healthy
        yield from _holder_families(samples)


HOLDER_LABELS = (*GPU_LABELS, "namespace", "pod", "container")


def _holder_families(samples: Sequence[GpuMetricSample]) -> Iterable[GaugeMetricFamily]:
    """dcgm-exporter's pod mapping: the GPU's figures again, labelled with who holds it."""
    allocated = GaugeMetricFamily(
        "queuectl_gpu_allocated", "1 if the kubelet gave the GPU to a container.", labels=GPU_LABELS
    )
    util = GaugeMetricFamily(
        "queuectl_gpu_container_utilization_ratio",
        "queuectl_gpu_utilization_ratio of a GPU, by the container holding it.",
        labels=HOLDER_LABELS,
    )
    memory = GaugeMetricFamily(
        "queuectl_gpu_container_memory_used_bytes",
        "queuectl_gpu_memory_used_bytes of a GPU, by the container holding it.",
        labels=HOLDER_LABELS,
    )
    for s in samples:
        if s.holders is None:
            continue
        allocated.add_metric(_labels(s), 1.0 if s.holders else 0.0)
        for holder in s.holders:
            if s.utilization_ratio is not None:
                util.add_metric([*_labels(s), *holder], s.utilization_ratio)
            if s.memory_used_bytes is not None:
                memory.add_metric([*_labels(s), *holder], float(s.memory_used_bytes))
    yield from (allocated, util, memory)


def _labels(s: GpuMetricSample) -> list[str]:
    return [s.node, str(s.gpu), s.uuid, s.model]


GPU_COLLECTOR = GpuCollector()
AGENT_REGISTRY.register(GPU_COLLECTOR)

AGENT_NVML_AVAILABLE = Gauge(
    "queuectl_agent_nvml_available",
    "1 if the agent could open NVML.",
    ["node"],
    registry=AGENT_REGISTRY,
)
AGENT_PASSES = Counter(
    "queuectl_agent_passes_total",
    "Discovery and health passes run.",
    ["node"],
    registry=AGENT_REGISTRY,
)
AGENT_NODE_WRITES = Counter(
    "queuectl_agent_node_writes_total",
    "Patches the agent sent to its Node, by result.",
    ["node", "result"],
    registry=AGENT_REGISTRY,
)
