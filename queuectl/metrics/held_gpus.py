"""Who holds each GPU and how busy it is, from the node agents' reports: a collector on the
controller's registry, fed by `controller/nodes/gpuuse.py`."""

from __future__ import annotations

import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from queuectl.metrics.controller import CONTROLLER_REGISTRY


@dataclass(frozen=True)
class HeldGpuSample:
    """A GPU of a node's latest report and who holds it; `cluster_queue`/`workload` empty for
    a pod queuectl did not place."""

    node: str
    uuid: str
    namespace: str
    pod: str
    container: str
    workload: str
    cluster_queue: str
    utilization_ratio: float


class HeldGpuCollector(Collector):
    """dcgm-exporter's per-GPU pod mapping, with the queue workload (the controller resolves
    it through the pod's verified owner chain), and the fleet's allocated and used GPUs by
    ClusterQueue. Each node's rows are replaced by its next report, dropped with the node."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._nodes: dict[str, tuple[HeldGpuSample, ...]] = {}

    def update(self, node: str, rows: Sequence[HeldGpuSample] | None) -> None:
        with self._lock:
            if rows is None:
                self._nodes.pop(node, None)
            else:
                self._nodes[node] = tuple(rows)

    def collect(self) -> Iterable[GaugeMetricFamily]:
        with self._lock:
            rows = [r for node_rows in self._nodes.values() for r in node_rows]
        labels = ("node", "uuid", "namespace", "pod", "container", "workload", "cluster_queue")
        util = GaugeMetricFamily(
            "queuectl_workload_gpu_utilization_ratio",
            "Mean utilization of a GPU over its node's latest report, by who holds it.",
            labels=labels,
        )
        allocated = GaugeMetricFamily(
            "queuectl_gpus_allocated",
            "GPUs held by containers in the nodes' latest reports, by ClusterQueue ('' outside).",
            labels=("cluster_queue",),
        )
        used = GaugeMetricFamily(
            "queuectl_gpus_used",
            "Those GPUs weighted by their utilization (GPU-equivalents busy), by ClusterQueue.",
            labels=("cluster_queue",),
        )
        per_queue: dict[str, list[float]] = {}
        for r in rows:
            util.add_metric(
                [r.node, r.uuid, r.namespace, r.pod, r.container, r.workload, r.cluster_queue],
                r.utilization_ratio,
            )
            per_queue.setdefault(r.cluster_queue, []).append(r.utilization_ratio)
        for queue, ratios in sorted(per_queue.items()):
            allocated.add_metric([queue], float(len(ratios)))
            used.add_metric([queue], sum(ratios))
        yield from (util, allocated, used)


HELD_GPU_COLLECTOR = HeldGpuCollector()
CONTROLLER_REGISTRY.register(HELD_GPU_COLLECTOR)
