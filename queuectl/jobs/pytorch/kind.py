"""PyTorchJob (kubeflow.org/v1, training-operator v1.8.1) as a `JobKind`: the Master and the
Worker replica specs are pod sets (`master`, `worker`), spec.runPolicy.suspend holds it (the
operator deletes its pods and services and sets condition Suspended)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

from queuectl.api import names
from queuectl.api.resource import Obj, Resource
from queuectl.api.views import ObjectView
from queuectl.jobs import pinning
from queuectl.jobs import podtemplate as pt
from queuectl.jobs import workload as wl
from queuectl.jobs.kind import Finished, JsonPatch, PodSet, PodSetPlacement

PYTORCH_JOBS: Final = Resource("kubeflow.org", "v1", "pytorchjobs", True, "PyTorchJob")
REPLICAS: Final = ("spec", "pytorchReplicaSpecs")
ROLES: Final = {"master": "Master", "worker": "Worker"}
REPLICA_INDEX: Final = pinning.IndexSource(names.LABEL_KUBEFLOW_REPLICA_INDEX)
"""The operator labels each pod with its index among its replica type's: a worker's rank
order, so a sliced worker pod set is pinned pod by pod (docs/design/jobs.md, "Per-pod pins")."""
"""Pod set name -> replica type, in the order the pod sets are listed."""


def _template_path(replica_type: str) -> tuple[str, ...]:
    return (*REPLICAS, replica_type, "template")


class PyTorchJob:
    """The `JobKind` for PyTorchJobs."""

    resource: Resource = PYTORCH_JOBS
    suspend_field: str = "spec.runPolicy.suspend"

    def _roles(self, job: Obj) -> list[tuple[str, str]]:
        specs = pt.at_path(job, REPLICAS) or {}
        return [(name, rtype) for name, rtype in ROLES.items() if rtype in specs]

    def queue_name(self, job: Obj) -> str | None:
        return wl.queue_name(job)

    def is_suspended(self, job: Obj) -> bool:
        return bool(pt.at_path(job, ("spec", "runPolicy", "suspend")))

    def pod_sets(self, job: Obj) -> list[PodSet]:
        specs = pt.at_path(job, REPLICAS) or {}
        return [
            PodSet(
                name,
                1 if specs[rtype].get("replicas") is None else int(specs[rtype]["replicas"]),
                specs[rtype].get("template") or {},
                f"pytorchReplicaSpecs.{rtype}.replicas",
                ".".join(_template_path(rtype)),
            )
            for name, rtype in self._roles(job)
        ]

    def workload_name(self, job: Obj) -> str:
        meta = job["metadata"]
        return wl.workload_name_for("pytorchjob", meta["name"], meta.get("uid", ""))

    def workload_spec(self, job: Obj) -> dict[str, Any]:
        return wl.workload_spec(job, self.pod_sets(job))

    def pod_priority_class(self, job: Obj) -> str | None:
        for _, rtype in self._roles(job):
            if found := pt.priority_class(pt.at_path(job, _template_path(rtype)) or {}):
                return found
        return None

    def finished(self, job: Obj) -> Finished | None:
        conds = ObjectView(job).true_conditions
        if (c := conds.get("Succeeded")) is not None:
            msg = c.get("message") or "PyTorchJob succeeded"
            return Finished(True, names.REASON_FINISHED_SUCCEEDED, msg)
        if (c := conds.get("Failed")) is not None:
            msg = c.get("message") or c.get("reason") or "PyTorchJob failed"
            return Finished(False, names.REASON_FINISHED_FAILED, msg)
        return None

    def pods_gone(self, job: Obj) -> bool:
        # Suspending, the operator deletes the pods, zeroes every replica's `active` and sets
        # Suspended in one status write.
        statuses = ObjectView(job).status.get("replicaStatuses") or {}
        idle = not any(int((s or {}).get("active") or 0) for s in statuses.values())
        return idle and ("Suspended" in ObjectView(job).true_conditions or not statuses)

    def can_restore(self, job: Obj) -> bool:
        return self.is_suspended(job)  # the operator reads the templates only to create pods

    def run_patch(
        self, job: Obj, pod_sets: Sequence[Obj], placements: Sequence[PodSetPlacement]
    ) -> dict[str, Any]:
        by_name = {p.name: p for p in placements}
        name = self.workload_name(job)
        fragments = []
        for role, rtype in self._roles(job):
            path = _template_path(rtype)
            fragments.append(pt.merge_at([*path, "metadata", "labels", names.LABEL_WORKLOAD], name))
            placement = by_name.get(role, PodSetPlacement(role))
            fragments.append(pt.run_fragment(path, pod_sets, placement, REPLICA_INDEX))
        return pt.deep_merge({"spec": {"runPolicy": {"suspend": False}}}, *fragments)

    def suspend_patch(self, job: Obj) -> dict[str, Any]:
        return {"spec": {"runPolicy": {"suspend": True}}}

    def restore_patch(self, job: Obj, pod_sets: Sequence[Obj]) -> dict[str, Any] | None:
        found = [
            f
            for role, rtype in self._roles(job)
            if (f := pt.restore_fragment(job, _template_path(rtype), pod_sets, role)) is not None
        ]
        return pt.deep_merge(*found) if found else None

    def suspend_ops(self, job: Obj) -> JsonPatch:
        spec = job.get("spec")
        if not isinstance(spec, dict):
            return [{"op": "add", "path": "/spec", "value": {"runPolicy": {"suspend": True}}}]
        run_policy = spec.get("runPolicy")
        if not isinstance(run_policy, dict):
            return [{"op": "add", "path": "/spec/runPolicy", "value": {"suspend": True}}]
        if run_policy.get("suspend"):
            return []
        return [{"op": "add", "path": "/spec/runPolicy/suspend", "value": True}]
