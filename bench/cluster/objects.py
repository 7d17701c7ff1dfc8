"""The API objects of a scenario, as plain dicts: flavor, cohorts, ClusterQueues, LocalQueues,
Workloads, and for a topology scenario its Topology and Node objects (bench/cluster/fleet.py).
Names sort in creation order within a stream (zero-padded sequence numbers), which keeps the
controller's tie-break between equal creation seconds the same as the real order.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from bench.cluster import fleet
from bench.cluster.scenario import Scenario, Stream
from queuectl.api import names

LABEL_BENCH = "bench.queuectl.io/run"
LABEL_CLASS = "bench.queuectl.io/class"


@dataclass(frozen=True)
class Layout:
    """Where one run's objects live: a namespace and a name prefix for cluster-scoped ones."""

    scenario: Scenario
    run_id: str

    @property
    def namespace(self) -> str:
        return f"bench-{self.run_id}"

    @property
    def flavor(self) -> str:
        return f"{self.run_id}-{self.scenario.flavor}"

    @property
    def topology(self) -> str:
        return f"{self.run_id}-topology"

    def cohort(self, c: int) -> str:
        return f"{self.run_id}-co{c}"

    def cluster_queue(self, c: int, q: int) -> str:
        return f"{self.run_id}-co{c}-cq{q}"

    def queues(self) -> list[tuple[int, int]]:
        s = self.scenario
        return [(c, q) for c in range(s.cohorts) for q in range(s.queues_per_cohort)]


def _meta(name: str, namespace: str | None = None, run_id: str = "") -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "labels": {LABEL_BENCH: run_id}}
    if namespace is not None:
        meta["namespace"] = namespace
    return meta


def _obj(kind: str, meta: dict[str, Any], spec: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": names.API_VERSION, "kind": kind, "metadata": meta, "spec": spec}


def namespace(lay: Layout) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": _meta(lay.namespace, None, lay.run_id),
    }


def flavor(lay: Layout) -> dict[str, Any]:
    """Without a fleet: no node labels (nothing runs). With one: the run's nodes (selected by
    the run label, so nodes of another run or test are never used) and its Topology."""
    if lay.scenario.fleet is None:
        return _obj("ResourceFlavor", _meta(lay.flavor, None, lay.run_id), {})
    spec = {"nodeLabels": {LABEL_BENCH: lay.run_id}, "topologyName": lay.topology}
    return _obj("ResourceFlavor", _meta(lay.flavor, None, lay.run_id), spec)


def topology(lay: Layout) -> dict[str, Any]:
    assert lay.scenario.fleet is not None
    levels = [{"nodeLabel": level.label} for level in lay.scenario.fleet.levels]
    return _obj("Topology", _meta(lay.topology, None, lay.run_id), {"levels": levels})


def nodes(lay: Layout) -> list[dict[str, Any]]:
    f = lay.scenario.fleet
    return [] if f is None else [fleet.node(lay.run_id, f, p, LABEL_BENCH) for p in f.paths()]


def cohort(lay: Layout, c: int) -> dict[str, Any]:
    return _obj("Cohort", _meta(lay.cohort(c), None, lay.run_id), {})


def cluster_queue(lay: Layout, c: int, q: int) -> dict[str, Any]:
    s = lay.scenario
    quota: dict[str, Any] = {"name": s.resource, "nominalQuota": s.queue.nominal}
    if s.queue.borrowing_limit is not None:
        quota["borrowingLimit"] = s.queue.borrowing_limit
    spec = {
        "cohortName": lay.cohort(c),
        "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": lay.namespace}},
        "preemption": {
            "reclaimWithinCohort": s.queue.reclaim_within_cohort,
            "withinClusterQueue": s.queue.within_cluster_queue,
        },
        "resourceGroups": [
            {
                "coveredResources": [s.resource],
                "flavors": [{"name": lay.flavor, "resources": [quota]}],
            }
        ],
    }
    return _obj("ClusterQueue", _meta(lay.cluster_queue(c, q), None, lay.run_id), spec)


def local_queue(lay: Layout, c: int, q: int) -> dict[str, Any]:
    name = lay.cluster_queue(c, q)
    return _obj("LocalQueue", _meta(name, lay.namespace, lay.run_id), {"clusterQueue": name})


def workload_name(c: int, q: int, stream: Stream, seq: int) -> str:
    return f"co{c}-cq{q}-{stream.cls}-{seq:06d}"


def workload(lay: Layout, c: int, q: int, stream: Stream, seq: int) -> dict[str, Any]:
    """`pods` pods of `units / pods` of the scenario's resource each, placed as the stream asks;
    priority set directly (no class)."""
    meta = _meta(workload_name(c, q, stream, seq), lay.namespace, lay.run_id)
    meta["labels"][LABEL_CLASS] = stream.cls
    container = {
        "name": "main",
        "image": "bench",
        "resources": {"requests": {lay.scenario.resource: stream.pod_request()}},
    }
    pod_set: dict[str, Any] = {
        "name": "main",
        "count": stream.pods,
        "template": {"spec": {"containers": [container]}},
    }
    if stream.placement is not None and lay.scenario.fleet is not None:
        pod_set["topologyRequest"] = fleet.topology_request(stream.placement, lay.scenario.fleet)
    spec = {
        "queueName": lay.cluster_queue(c, q),
        "priority": stream.priority,
        "podSets": [pod_set],
    }
    return _obj("Workload", meta, spec)
