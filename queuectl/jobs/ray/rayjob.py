"""RayJob (ray.io/v1, KubeRay v1.5.0) as a `JobKind`: its RayCluster (spec.rayClusterSpec: the
head and each worker group) and, in K8sJobMode, the submitter pod are admitted as one gang;
spec.suspend holds it (KubeRay then deletes the RayCluster and the submitter Job and reports
jobDeploymentStatus Suspended).

KubeRay refuses to suspend a RayJob whose shutdownAfterJobFinishes is false, and one that runs on
an existing cluster (clusterSelector): such a RayJob fails its validation once queued.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

from queuectl.api import names
from queuectl.api.resource import Obj, Resource
from queuectl.api.views import ObjectView
from queuectl.jobs import podtemplate as pt
from queuectl.jobs import workload as wl
from queuectl.jobs.batch import JOBS, BatchJob
from queuectl.jobs.frozen import pairs_by_name
from queuectl.jobs.jobset.kind import is_kind
from queuectl.jobs.kind import Finished, JsonPatch, PodSet, PodSetPlacement
from queuectl.jobs.ray import clusterspec
from queuectl.jobs.ray.raycluster import GROUP, RAY_CLUSTERS

RAY_JOBS: Final = Resource(GROUP, "v1", "rayjobs", True, "RayJob")
CLUSTER: Final = ("spec", "rayClusterSpec")
SUBMITTER: Final = "submitter"
SUBMITTER_TEMPLATE: Final = ("spec", "submitterPodTemplate")
# The deployment states in which KubeRay has no RayCluster and no submitter Job for it.
_NOTHING_RUNS: Final = frozenset({"", "New", "Suspended", "ValidationFailed"})


def default_submitter(cluster: Mapping[str, Any]) -> dict[str, Any]:
    """The submitter pod KubeRay makes when spec.submitterPodTemplate is absent
    (common.GetSubmitterTemplate): the head's image, requests 500m CPU / 200Mi, limits 1 / 1Gi."""
    containers = pt.at_path(cluster, ("headGroupSpec", "template", "spec", "containers")) or [{}]
    return {
        "spec": {
            "restartPolicy": "Never",
            "containers": [
                {
                    "name": "ray-job-submitter",
                    "image": containers[0].get("image", ""),
                    "resources": {
                        "limits": {"cpu": "1", "memory": "1Gi"},
                        "requests": {"cpu": "500m", "memory": "200Mi"},
                    },
                }
            ],
        }
    }


def has_submitter(job: Obj) -> bool:
    """K8sJobMode (the default) runs `ray job submit` in a pod of its own."""
    return (ObjectView(job).spec.get("submissionMode") or "K8sJobMode") == "K8sJobMode"


class RayJob:
    """The `JobKind` (and `MakesChildren`) for RayJobs."""

    resource: Resource = RAY_JOBS
    suspend_field: str = "spec.suspend"
    children: tuple[Resource, ...] = (RAY_CLUSTERS, JOBS)

    def _cluster(self, job: Obj) -> dict[str, Any]:
        found: dict[str, Any] = pt.at_path(job, CLUSTER) or {}
        return found

    def _submitter_template(self, job: Obj) -> dict[str, Any]:
        found: dict[str, Any] = pt.at_path(job, SUBMITTER_TEMPLATE) or default_submitter(
            self._cluster(job)
        )
        return found

    def queue_name(self, job: Obj) -> str | None:
        return wl.queue_name(job)

    def is_suspended(self, job: Obj) -> bool:
        return bool(ObjectView(job).spec.get("suspend"))

    def pod_sets(self, job: Obj) -> list[PodSet]:
        out = clusterspec.pod_sets(self._cluster(job), ".".join(CLUSTER))
        if has_submitter(job):
            template = self._submitter_template(job)
            out.append(
                PodSet(SUBMITTER, 1, template, "one submitter", ".".join(SUBMITTER_TEMPLATE))
            )
        return out

    def workload_name(self, job: Obj) -> str:
        meta = job["metadata"]
        return wl.workload_name_for("rayjob", meta["name"], meta.get("uid", ""))

    def workload_spec(self, job: Obj) -> dict[str, Any]:
        return wl.workload_spec(job, self.pod_sets(job))

    def pod_priority_class(self, job: Obj) -> str | None:
        return pt.priority_class(pt.at_path(job, (*CLUSTER, "headGroupSpec", "template")) or {})

    def finished(self, job: Obj) -> Finished | None:
        status = ObjectView(job).status
        deployment = status.get("jobDeploymentStatus")
        message = status.get("message") or ""
        if deployment == "Complete":
            if status.get("jobStatus") == "SUCCEEDED":
                return Finished(
                    True, names.REASON_FINISHED_SUCCEEDED, message or "Ray job succeeded"
                )
            why = f"Ray job {str(status.get('jobStatus') or 'ended').lower()}"
            return Finished(False, names.REASON_FINISHED_FAILED, message or why)
        if deployment in ("Failed", "ValidationFailed"):
            reason = status.get("reason") or deployment
            return Finished(False, names.REASON_FINISHED_FAILED, message or f"RayJob {reason}")
        return None

    def pods_gone(self, job: Obj) -> bool:
        return str(ObjectView(job).status.get("jobDeploymentStatus") or "") in _NOTHING_RUNS

    def can_restore(self, job: Obj) -> bool:
        return self.is_suspended(job)  # the RayCluster is made from the spec on each resume

    def run_patch(
        self, job: Obj, pod_sets: Sequence[Obj], placements: Sequence[PodSetPlacement]
    ) -> dict[str, Any]:
        name = self.workload_name(job)
        patches = [
            {"spec": {"suspend": False}},
            clusterspec.run_fragment(self._cluster(job), CLUSTER, name, pod_sets, placements),
        ]
        if has_submitter(job):
            # An absent submitter template is written out as KubeRay's default, so that the
            # submitter pod gets the placement too.
            placement = {p.name: p for p in placements}.get(SUBMITTER, PodSetPlacement(SUBMITTER))
            template = clusterspec.workload_label(self._submitter_template(job), name)
            injected = pt.inject(pt.original_pod_spec(pod_sets, SUBMITTER), placement)
            template["spec"] = {**template.get("spec", {}), **injected}
            patches.append(pt.merge_at(SUBMITTER_TEMPLATE, template))
        return pt.deep_merge(*patches)

    def suspend_patch(self, job: Obj) -> dict[str, Any]:
        return {"spec": {"suspend": True}}

    def restore_patch(self, job: Obj, pod_sets: Sequence[Obj]) -> dict[str, Any] | None:
        found = []
        cluster = clusterspec.restore_fragment(job, self._cluster(job), CLUSTER, pod_sets)
        if cluster is not None:
            found.append(cluster)
        if has_submitter(job) and pt.at_path(job, SUBMITTER_TEMPLATE) is not None:
            sub = pt.restore_fragment(job, SUBMITTER_TEMPLATE, pod_sets, SUBMITTER)
            if sub is not None:
                found.append(sub)
        return pt.deep_merge(*found) if found else None

    def suspend_ops(self, job: Obj) -> JsonPatch:
        return wl.suspend_ops_at(job, "suspend")

    def child_pod_sets(self, job: Obj, child: Obj) -> list[tuple[PodSet, PodSet]] | None:
        """KubeRay makes the RayCluster from spec.rayClusterSpec (named in
        status.rayClusterName once it has picked the name) and, in K8sJobMode, the submitter
        Job, named as the RayJob, from the submitter template. In SidecarMode KubeRay adds
        its submitter container to the head's template: the head is not compared there."""
        name = ObjectView(child).meta.get("name")
        mine = self.pod_sets(job)
        if is_kind(child, RAY_CLUSTERS):
            chosen = ObjectView(job).status.get("rayClusterName")
            if chosen and chosen != name:
                return None
            sidecar = ObjectView(job).spec.get("submissionMode") == "SidecarMode"
            skip = {SUBMITTER, clusterspec.HEAD} if sidecar else {SUBMITTER}
            made = [
                ps for ps in clusterspec.pod_sets(ObjectView(child).spec) if ps.name not in skip
            ]
            return pairs_by_name(made, [ps for ps in mine if ps.name not in skip])
        if is_kind(child, JOBS) and has_submitter(job) and name == job["metadata"]["name"]:
            return [(BatchJob().pod_sets(child)[0], mine[-1])]
        return None
