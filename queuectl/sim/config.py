"""The manifests users apply -> what the simulator feeds the core.

Each queuectl object is validated by its API model (so a manifest the API server would refuse is
refused here too, with the same message) and converted by `queuectl.convert`, the code the
controller runs on watch events. Other kinds (Namespaces, Jobs) are skipped: the trace says what
runs.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import pydantic

from queuectl import api, convert
from queuectl.core import ClusterQueue, Cohort, Flavor, Topology


class SimInputError(ValueError):
    """Bad input: the message names the object or line and what to do about it."""


@dataclass(frozen=True, slots=True)
class PriorityClass:
    name: str
    value: int
    grace_seconds: float = 0.0
    minimum_runtime_seconds: float = 0.0


@dataclass(frozen=True, slots=True)
class SimConfig:
    flavors: tuple[Flavor, ...] = ()
    topologies: tuple[Topology, ...] = ()
    cohorts: tuple[Cohort, ...] = ()
    cluster_queues: tuple[ClusterQueue, ...] = ()
    local_queues: Mapping[tuple[str, str], str] = field(default_factory=dict)
    """(namespace, LocalQueue name) -> ClusterQueue name."""
    priority_classes: Mapping[str, PriorityClass] = field(default_factory=dict)

    def flavor(self, name: str) -> Flavor | None:
        return next((f for f in self.flavors if f.name == name), None)

    def topology(self, name: str | None) -> Topology | None:
        return next((t for t in self.topologies if t.name == name), None)

    def cluster_queue(self, name: str) -> ClusterQueue | None:
        return next((q for q in self.cluster_queues if q.name == name), None)


_MODELS: dict[str, type[api.Resource]] = {m.__name__: m for m in api.KINDS}


def _validate(doc: Mapping[str, Any], where: str) -> None:
    model = _MODELS[doc["kind"]]
    try:
        model.model_validate(dict(doc))
    except pydantic.ValidationError as err:
        first = err.errors()[0]
        loc = ".".join(str(p) for p in first["loc"])
        raise SimInputError(
            f"{where}: {doc['kind']} is invalid at {loc or 'top level'}: {first['msg']}; "
            "fix the manifest (kubectl apply would refuse it too)"
        ) from None


def load_config(docs: Iterable[tuple[str, Mapping[str, Any] | None]]) -> SimConfig:
    """Build the configuration from (where, document) pairs: `where` names the file (and
    document index) in error messages; None documents (empty YAML sections) are skipped."""
    flavors: list[Flavor] = []
    topologies: list[Topology] = []
    cohorts: list[Cohort] = []
    queues: list[ClusterQueue] = []
    local: dict[tuple[str, str], str] = {}
    classes: dict[str, PriorityClass] = {}
    for where, doc in docs:
        if doc is None:
            continue
        if not isinstance(doc, Mapping) or not isinstance(doc.get("kind"), str):
            raise SimInputError(f"{where}: not a Kubernetes object (no 'kind'); pass manifests")
        kind = doc["kind"]
        if kind not in _MODELS or kind == "Workload":
            continue
        _validate(doc, where)
        if kind == "ResourceFlavor":
            flavors.append(convert.flavor(doc))
        elif kind == "Topology":
            topologies.append(convert.topology(doc))
        elif kind == "Cohort":
            cohorts.append(convert.cohort(doc))
        elif kind == "ClusterQueue":
            queues.append(convert.cluster_queue(doc))
        elif kind == "LocalQueue":
            meta = doc["metadata"]
            ns = meta.get("namespace") or "default"
            local[(ns, meta["name"])] = (doc.get("spec") or {})["clusterQueue"]
        elif kind == "WorkloadPriorityClass":
            name = doc["metadata"]["name"]
            classes[name] = PriorityClass(
                name=name,
                value=int(doc.get("value") or 0),
                grace_seconds=float(doc.get("preemptionGracePeriodSeconds") or 0),
                minimum_runtime_seconds=float(doc.get("minimumRuntimeSeconds") or 0),
            )
    if not queues:
        raise SimInputError("no ClusterQueue in the manifests: pass the files you would apply")
    if not local:
        raise SimInputError("no LocalQueue in the manifests: jobs name a LocalQueue to run")
    return SimConfig(
        flavors=tuple(flavors),
        topologies=tuple(topologies),
        cohorts=tuple(cohorts),
        cluster_queues=tuple(queues),
        local_queues=local,
        priority_classes=classes,
    )


def nominal_of(cq: ClusterQueue, resource: str) -> int:
    """A queue's own quota of `resource` over all its flavors (its entitlement)."""
    return sum(
        r.nominal
        for group in cq.resource_groups
        for fq in group.flavors
        for r in fq.resources
        if r.name == resource
    )
