"""Kubeflow TrainJob (trainer.kubeflow.org/v1alpha1, trainer v2.1.0) as a `JobKind`.

Its pod sets are its runtime's replicated jobs (runtime.py), read from the snapshot the webhook
wrote on CREATE, with the TrainJob's numNodes, resourcesPerNode and the user's own
podTemplateOverrides applied. spec.suspend holds it: trainer creates the JobSet suspended with
it and, while either is suspended, applies the whole JobSet again from the runtime and the
TrainJob (a running JobSet is never updated).

Placement goes through spec.podTemplateOverrides (overrides.py), in two steps: trainer's webhook
lets the overrides change only while the update leaves the TrainJob suspended (and its JobSet
has no active job), so `run_patch` returns the overrides while they are not in place and the
unsuspend once they are; the reconcile loop calls it again while the job is suspended.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

from queuectl.api import names
from queuectl.api.resource import Obj, Resource
from queuectl.api.views import ObjectView
from queuectl.jobs import podtemplate as pt
from queuectl.jobs import workload as wl
from queuectl.jobs.frozen import pairs_by_name
from queuectl.jobs.jobset.kind import JOBSETS, JobSet, is_kind
from queuectl.jobs.kind import Finished, InputRef, JsonPatch, PodSet, PodSetPlacement
from queuectl.jobs.trainjob import overrides as ov
from queuectl.jobs.trainjob import runtime as rt

TRAIN_JOBS: Final = Resource(rt.GROUP, "v1alpha1", "trainjobs", True, "TrainJob")


def _snapshot_text(job: Obj) -> str | None:
    return ObjectView(job).annotations.get(names.ANNOTATION_TRAINJOB_RUNTIME)


def _spec_queue_label(job: Obj) -> bool:
    return names.LABEL_QUEUE_NAME in (ObjectView(job).spec.get("labels") or {})


def _active(job: Obj) -> int:
    return sum(int(s.get("active") or 0) for s in ObjectView(job).status.get("jobsStatus") or ())


def _pod_sets(job: Obj, overrides: Sequence[Obj]) -> list[PodSet]:
    """The pod sets with `overrides` merged into the runtime's templates (the user's alone:
    what the Workload records; every entry: what trainer writes into the JobSet)."""
    snap = rt.recorded(job)
    if snap is None:
        return []  # never queued (the webhook refuses queueing it later)
    ml = snap.get("mlPolicy")
    trainer = pt.at_path(job, ("spec", "trainer")) or {}
    out = []
    for rjob in snap.get("replicatedJobs") or ():
        name = str(rjob.get("name") or "")
        template = rt.with_resources_per_node(rjob.get("template") or {}, rjob, ml, trainer)
        out.append(
            PodSet(
                name,
                rt.replicas(rjob) * rt.pod_count(rjob, ml, trainer),
                ov.apply(template, overrides, name),
                rt.count_from(rjob, ml),
                f"spec.podTemplateOverrides (targetJobs {name})",
            )
        )
    return out


class TrainJob:
    """The `JobKind` (and `ReadsInputs`, `FreezesFields`, `MakesChildren`) for TrainJobs."""

    resource: Resource = TRAIN_JOBS
    suspend_field: str = "spec.suspend"
    children: tuple[Resource, ...] = (JOBSETS,)
    inputs: tuple[Resource, ...] = (rt.CLUSTER_RUNTIMES, rt.RUNTIMES)

    def queue_name(self, job: Obj) -> str | None:
        # Without the runtime's record (created before queuectl's webhook ran) there are no pod
        # sets to queue: the controller leaves it alone rather than make an empty Workload.
        return wl.queue_name(job) if _snapshot_text(job) is not None else None

    def is_suspended(self, job: Obj) -> bool:
        return bool(ObjectView(job).spec.get("suspend"))

    def pod_sets(self, job: Obj) -> list[PodSet]:
        return _pod_sets(job, ov.users(job))

    def workload_name(self, job: Obj) -> str:
        meta = job["metadata"]
        return wl.workload_name_for("trainjob", meta["name"], meta.get("uid", ""))

    def workload_spec(self, job: Obj) -> dict[str, Any]:
        return wl.workload_spec(job, self.pod_sets(job))

    def pod_priority_class(self, job: Obj) -> str | None:
        for ps in self.pod_sets(job):
            if found := pt.priority_class(ps.template):
                return found
        return None

    def finished(self, job: Obj) -> Finished | None:
        conds = ObjectView(job).true_conditions
        if (c := conds.get("Complete")) is not None:
            msg = c.get("message") or "TrainJob completed"
            return Finished(True, names.REASON_FINISHED_SUCCEEDED, msg)
        if (c := conds.get("Failed")) is not None:
            msg = c.get("message") or c.get("reason") or "TrainJob failed"
            return Finished(False, names.REASON_FINISHED_FAILED, msg)
        return None

    def pods_gone(self, job: Obj) -> bool:
        # jobsStatus mirrors the JobSet's replicatedJobsStatus: `active` counts child Jobs with
        # a pod pending or running.
        return _active(job) == 0

    def can_restore(self, job: Obj) -> bool:
        # trainer's webhook: overrides change only on a suspended TrainJob whose JobSet has no
        # active replicated job.
        return self.is_suspended(job) and _active(job) == 0

    def run_patch(
        self, job: Obj, pod_sets: Sequence[Obj], placements: Sequence[PodSetPlacement]
    ) -> dict[str, Any]:
        by_name = {p.name: p for p in placements}
        workload = self._workload(job)
        wanted = [
            ov.placed(
                ps.name,
                pt.original_pod_spec(pod_sets, ps.name),
                by_name.get(ps.name, PodSetPlacement(ps.name)),
                workload,
            )
            for ps in self.pod_sets(job)
        ]
        if ov.ours(job) != wanted:  # step one: the placement, still suspended
            return {"spec": {"podTemplateOverrides": [*ov.users(job), *wanted]}}
        return {"spec": {"suspend": False}}  # step two, once the TrainJob holds it

    def suspend_patch(self, job: Obj) -> dict[str, Any]:
        return {"spec": {"suspend": True}}

    def restore_patch(self, job: Obj, pod_sets: Sequence[Obj]) -> dict[str, Any] | None:
        if not ov.ours(job):
            return None
        return {"spec": {"podTemplateOverrides": ov.users(job) or None}}

    def suspend_ops(self, job: Obj) -> JsonPatch:
        return wl.suspend_ops_at(job, "suspend")

    # --- FreezesFields and MakesChildren ------------------------------------------------------
    def frozen_fields(self, job: Obj) -> dict[str, Any]:
        return {"spec.runtimeRef": pt.at_path(job, ("spec", "runtimeRef"))}

    def child_pod_sets(self, job: Obj, child: Obj) -> list[tuple[PodSet, PodSet]] | None:
        """trainer makes one JobSet, named as the TrainJob, from the runtime with every
        override merged in (the user's and queuectl's placement)."""
        child_name = ObjectView(child).meta.get("name")
        if not is_kind(child, JOBSETS) or child_name != ObjectView(job).meta.get("name"):
            return None
        return pairs_by_name(JobSet().pod_sets(child), _pod_sets(job, ov.entries(job)))

    # --- ReadsInputs: the runtime, snapshotted on CREATE --------------------------------------
    def input_ref(self, job: Obj) -> InputRef:
        return rt.runtime_ref(job)

    def snapshot_ops(self, job: Obj, found: Obj | None) -> JsonPatch:
        if found is None:
            raise rt.missing(self.input_ref(job), str(job["metadata"].get("namespace") or ""))
        value = rt.encode(rt.snapshot(found))
        annotations = ObjectView(job).meta.get("annotations")
        if not annotations:
            key = {names.ANNOTATION_TRAINJOB_RUNTIME: value}
            return [{"op": "add", "path": "/metadata/annotations", "value": key}]
        if annotations.get(names.ANNOTATION_TRAINJOB_RUNTIME) == value:
            return []
        path = "/metadata/annotations/" + names.ANNOTATION_TRAINJOB_RUNTIME.replace("/", "~1")
        return [{"op": "add", "path": path, "value": value}]

    def problems(self, old: Obj | None, new: Obj) -> list[str]:
        out = []
        if _spec_queue_label(new) and not (old and _spec_queue_label(old)):
            out.append(
                f"label {names.LABEL_QUEUE_NAME} in spec.labels would go to the derived JobSet, "
                "which queuectl never queues on its own; put it in metadata.labels to queue "
                "the TrainJob"
            )
        if old is None:
            if _snapshot_text(new) is not None and wl.queue_name(new) is None:
                out.append(
                    f"annotation {names.ANNOTATION_TRAINJOB_RUNTIME} is set by queuectl only; "
                    "leave it out"
                )
            return out
        if _snapshot_text(old) != _snapshot_text(new):
            out.append(
                f"annotation {names.ANNOTATION_TRAINJOB_RUNTIME} is queuectl's record of the "
                "runtime the TrainJob was queued with; leave it as it is"
            )
        if wl.queue_name(new) and not wl.queue_name(old):
            out.append(
                "a TrainJob is queued when it is created (queuectl reads its runtime then); "
                f"delete it and create it again with label {names.LABEL_QUEUE_NAME}"
            )
        if ov.ours(old) != ov.ours(new):
            out.append(
                f"the podTemplateOverrides labelled {names.LABEL_WORKLOAD} are queuectl's "
                "placement; leave them as they are"
            )
        return out

    def _workload(self, job: Obj) -> str:
        """The Workload's name: the label the controller put on the TrainJob, else its own."""
        return ObjectView(job).labels.get(names.LABEL_WORKLOAD) or self.workload_name(job)
