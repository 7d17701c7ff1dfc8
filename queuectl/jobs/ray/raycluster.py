"""RayCluster (ray.io/v1, KubeRay v1.5.0) as a `JobKind`: the head and each worker group are
pod sets; spec.suspend holds it (KubeRay deletes every pod and reports RayClusterSuspended).

A RayCluster made by a RayJob copies the RayJob's labels, queue label included: it is part of
the RayJob's Workload, so it reads as not queued here (`queue_name` is None).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

from queuectl.api.resource import Obj, Resource
from queuectl.api.views import ObjectView
from queuectl.jobs import podtemplate as pt
from queuectl.jobs import workload as wl
from queuectl.jobs.kind import Finished, JsonPatch, PodSet, PodSetPlacement
from queuectl.jobs.ray import clusterspec

GROUP: Final = "ray.io"
RAY_CLUSTERS: Final = Resource(GROUP, "v1", "rayclusters", True, "RayCluster")
SPEC: Final = ("spec",)


def owned_by_ray_job(job: Obj) -> bool:
    return any(
        ref.get("controller")
        and ref.get("kind") == "RayJob"
        and str(ref.get("apiVersion", "")).startswith(f"{GROUP}/")
        for ref in ObjectView(job).owner_refs
    )


class RayCluster:
    """The `JobKind` for RayClusters."""

    resource: Resource = RAY_CLUSTERS
    suspend_field: str = "spec.suspend"

    def queue_name(self, job: Obj) -> str | None:
        return None if owned_by_ray_job(job) else wl.queue_name(job)

    def is_suspended(self, job: Obj) -> bool:
        return bool(ObjectView(job).spec.get("suspend"))

    def pod_sets(self, job: Obj) -> list[PodSet]:
        return clusterspec.pod_sets(ObjectView(job).spec)

    def workload_name(self, job: Obj) -> str:
        meta = job["metadata"]
        return wl.workload_name_for("raycluster", meta["name"], meta.get("uid", ""))

    def workload_spec(self, job: Obj) -> dict[str, Any]:
        return wl.workload_spec(job, self.pod_sets(job))

    def pod_priority_class(self, job: Obj) -> str | None:
        return pt.priority_class(pt.at_path(job, ("spec", "headGroupSpec", "template")) or {})

    def finished(self, job: Obj) -> Finished | None:
        return None  # a RayCluster serves until it is deleted

    def pods_gone(self, job: Obj) -> bool:
        # KubeRay sets RayClusterSuspended once every pod is deleted; a status older than the
        # spec (observedGeneration) may predate the suspend and is not believed.
        view = ObjectView(job)
        seen = int(view.status.get("observedGeneration") or 0)
        current = seen >= int(view.meta.get("generation") or 0)
        return current and "RayClusterSuspended" in view.true_conditions

    def can_restore(self, job: Obj) -> bool:
        return self.is_suspended(job)  # KubeRay reads the templates only to create pods

    def run_patch(
        self, job: Obj, pod_sets: Sequence[Obj], placements: Sequence[PodSetPlacement]
    ) -> dict[str, Any]:
        placed = clusterspec.run_fragment(
            ObjectView(job).spec, SPEC, self.workload_name(job), pod_sets, placements
        )
        return pt.deep_merge({"spec": {"suspend": False}}, placed)

    def suspend_patch(self, job: Obj) -> dict[str, Any]:
        return {"spec": {"suspend": True}}

    def restore_patch(self, job: Obj, pod_sets: Sequence[Obj]) -> dict[str, Any] | None:
        return clusterspec.restore_fragment(job, ObjectView(job).spec, SPEC, pod_sets)

    def suspend_ops(self, job: Obj) -> JsonPatch:
        return wl.suspend_ops_at(job, "suspend")
