"""What the Kubeflow operators' kinds share (training-operator's PyTorchJob, mpi-operator's
MPIJob): replica specs by type under one spec field, each a pod set; `spec.runPolicy.suspend`
holds the job (the operator deletes its pods and sets condition Suspended); conditions
Succeeded and Failed end it. A kind says where its replica specs live, which replica types are
its pod sets, and its defaults; this base does the rest of `JobKind`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from queuectl.api import names
from queuectl.api.resource import Obj
from queuectl.api.views import ObjectView
from queuectl.jobs import pinning
from queuectl.jobs import podtemplate as pt
from queuectl.jobs import workload as wl
from queuectl.jobs.kind import Finished, JsonPatch, PodSet, PodSetPlacement

RUN_POLICY = ("spec", "runPolicy")


class ReplicaSpecsKind:
    """A `JobKind` over Kubeflow replica specs; subclasses set the class variables."""

    suspend_field: str = "spec.runPolicy.suspend"
    REPLICAS: ClassVar[tuple[str, ...]]
    """Where the replica specs live, e.g. ("spec", "pytorchReplicaSpecs")."""
    ROLES: ClassVar[Mapping[str, str]]
    """Pod set name -> replica type, in the order the pod sets are listed."""
    DEFAULT_REPLICAS: ClassVar[Mapping[str, int]] = {}
    """Replicas of a type whose spec leaves them out (the operator's default); else 1."""
    WORKLOAD_PREFIX: ClassVar[str]
    KIND_WORDS: ClassVar[str]
    """How messages name the kind ("PyTorchJob")."""
    INDEX: ClassVar[pinning.IndexSource | None] = None
    """Where a pod finds its index among its replica type's, for per-pod pins; None: the
    kind's pods are not pinned (docs/design/jobs.md, "Per-pod pins")."""

    def template_path(self, replica_type: str) -> tuple[str, ...]:
        return (*self.REPLICAS, replica_type, "template")

    def _roles(self, job: Obj) -> list[tuple[str, str]]:
        specs = pt.at_path(job, self.REPLICAS) or {}
        return [(name, rtype) for name, rtype in self.ROLES.items() if rtype in specs]

    def queue_name(self, job: Obj) -> str | None:
        return wl.queue_name(job)

    def is_suspended(self, job: Obj) -> bool:
        return bool(pt.at_path(job, (*RUN_POLICY, "suspend")))

    def pod_sets(self, job: Obj) -> list[PodSet]:
        specs = pt.at_path(job, self.REPLICAS) or {}
        field = self.REPLICAS[-1]
        out = []
        for name, rtype in self._roles(job):
            spec = specs[rtype] or {}
            replicas = spec.get("replicas")
            out.append(
                PodSet(
                    name,
                    self.DEFAULT_REPLICAS.get(rtype, 1) if replicas is None else int(replicas),
                    spec.get("template") or {},
                    f"{field}.{rtype}.replicas",
                    ".".join(self.template_path(rtype)),
                )
            )
        return out

    def workload_name(self, job: Obj) -> str:
        meta = job["metadata"]
        return wl.workload_name_for(self.WORKLOAD_PREFIX, meta["name"], meta.get("uid", ""))

    def workload_spec(self, job: Obj) -> dict[str, Any]:
        return wl.workload_spec(job, self.pod_sets(job))

    def pod_priority_class(self, job: Obj) -> str | None:
        for _, rtype in self._roles(job):
            if found := pt.priority_class(pt.at_path(job, self.template_path(rtype)) or {}):
                return found
        return None

    def finished(self, job: Obj) -> Finished | None:
        conds = ObjectView(job).true_conditions
        if (c := conds.get("Succeeded")) is not None:
            msg = c.get("message") or f"{self.KIND_WORDS} succeeded"
            return Finished(True, names.REASON_FINISHED_SUCCEEDED, msg)
        if (c := conds.get("Failed")) is not None:
            msg = c.get("message") or c.get("reason") or f"{self.KIND_WORDS} failed"
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
            path = self.template_path(rtype)
            fragments.append(pt.merge_at([*path, "metadata", "labels", names.LABEL_WORKLOAD], name))
            placement = by_name.get(role, PodSetPlacement(role))
            fragments.append(pt.run_fragment(path, pod_sets, placement, self.INDEX))
        return pt.deep_merge({"spec": {"runPolicy": {"suspend": False}}}, *fragments)

    def suspend_patch(self, job: Obj) -> dict[str, Any]:
        return {"spec": {"runPolicy": {"suspend": True}}}

    def restore_patch(self, job: Obj, pod_sets: Sequence[Obj]) -> dict[str, Any] | None:
        found = [
            f
            for role, rtype in self._roles(job)
            if (f := pt.restore_fragment(job, self.template_path(rtype), pod_sets, role))
            is not None
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
