"""Where a kind lives in the REST tree, and the plain-dict shape objects travel in.

Below the controller so that job kinds (queuectl.jobs) and the webhooks can name the resource
they handle without importing the controller's HTTP layer. Not to be confused with
`queuectl.api.Resource`, the typed model base of queuectl's own CRDs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final
from urllib.parse import quote

from queuectl.api import names

Obj = dict[str, Any]


@dataclass(frozen=True)
class Resource:
    """Where a kind lives in the REST tree."""

    group: str
    version: str
    plural: str
    namespaced: bool
    kind: str

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    def path(self, namespace: str | None = None, name: str | None = None, sub: str = "") -> str:
        base = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        if self.namespaced and namespace:
            base += f"/namespaces/{quote(namespace, safe='')}"
        base += f"/{self.plural}"
        if name is not None:
            base += f"/{quote(name, safe='')}"
            if sub:
                base += f"/{sub}"
        return base

    def discovery_path(self) -> str:
        """The group-version's discovery document: lists `plural` once its CRD is served."""
        return f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"


def _ours(plural: str, kind: str, namespaced: bool = False) -> Resource:
    return Resource(names.GROUP, names.VERSION, plural, namespaced, kind)


# queuectl's own kinds: the one list of where they live (controller, CLI, webhooks read it).
WORKLOADS: Final = _ours("workloads", "Workload", namespaced=True)
LOCAL_QUEUES: Final = _ours("localqueues", "LocalQueue", namespaced=True)
CLUSTER_QUEUES: Final = _ours("clusterqueues", "ClusterQueue")
COHORTS: Final = _ours("cohorts", "Cohort")
RESOURCE_FLAVORS: Final = _ours("resourceflavors", "ResourceFlavor")
TOPOLOGIES: Final = _ours("topologies", "Topology")
PRIORITY_CLASSES_OURS: Final = _ours("workloadpriorityclasses", "WorkloadPriorityClass")
ADMISSION_CHECKS: Final = _ours("admissionchecks", "AdmissionCheck")

# The core kinds more than one shell reads.
PODS: Final = Resource("", "v1", "pods", True, "Pod")
NODES: Final = Resource("", "v1", "nodes", False, "Node")
NAMESPACES: Final = Resource("", "v1", "namespaces", False, "Namespace")
PRIORITY_CLASSES: Final = Resource(
    "scheduling.k8s.io", "v1", "priorityclasses", False, "PriorityClass"
)
