"""JobSet (jobset.x-k8s.io/v1alpha2) as a `JobKind`.

Each replicated job is one pod set: `replicas` child Jobs of min(parallelism, completions)
pods each, all from `replicatedJobs[i].template.spec.template`. spec.suspend holds the JobSet;
the JobSet controller creates its child Jobs suspended at once and suspends or resumes them
with it.

Placement goes in as nodeSelector and tolerations, not node affinity: while a JobSet is
suspended its webhook lets only a template's labels, annotations, nodeSelector, tolerations and
schedulingGates change, and on resume its controller copies exactly those onto the child Jobs
that already exist (merged: keys it had stay unless overwritten). So a placement requirement
with one allowed value per label (a flavor's nodeLabels, a chosen topology domain) reaches
every child Job's pods; one with several values (pods spread over named nodes, no single
domain) cannot be written there and is left out (docs/design/jobs.md, "JobSet").
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any, Final

from queuectl.api import names
from queuectl.api.resource import Obj, Resource
from queuectl.jobs import podtemplate, workload
from queuectl.jobs.kind import Finished, JsonPatch, PodSet, PodSetPlacement

JOBSETS: Final = Resource("jobset.x-k8s.io", "v1alpha2", "jobsets", True, "JobSet")
POD_TEMPLATE: Final = ("template", "spec", "template")
"""Where a replicated job keeps its pod template."""


def replicated_jobs(job: Obj) -> list[Obj]:
    return list((job.get("spec") or {}).get("replicatedJobs") or [])


def replicated_job_pods(rjob: Mapping[str, Any]) -> int:
    """Pods a replicated job runs at once: replicas (default 1) child Jobs, each running
    parallelism (default 1) pods, never more than its completions."""
    replicas = rjob.get("replicas")
    job_spec = podtemplate.at_path(rjob, ("template", "spec")) or {}
    parallelism = job_spec.get("parallelism")
    per_job = 1 if parallelism is None else int(parallelism)
    completions = job_spec.get("completions")
    if completions is not None:
        per_job = min(per_job, int(completions))
    return (1 if replicas is None else int(replicas)) * per_job


def node_selector(placement: PodSetPlacement) -> dict[str, str]:
    """The placement's requirements that a nodeSelector can say: one value per label."""
    out = dict(placement.node_labels)
    out.update({k: vs[0] for k, vs in placement.domain.items() if len(vs) == 1})
    return out


def _with_scheduling(
    pod_spec: Obj, selector: Mapping[str, str] | None, tolerations: Sequence[Any] | None
) -> dict[str, Any]:
    """`pod_spec` with nodeSelector and tolerations set (absent when None or empty)."""
    out = copy.deepcopy(dict(pod_spec))
    for key, value in (("nodeSelector", selector), ("tolerations", tolerations)):
        if value:
            out[key] = copy.deepcopy(value)
        else:
            out.pop(key, None)
    return out


def _replace_pod_specs(job: Obj, pod_specs: Mapping[str, Obj]) -> list[Obj]:
    """The JobSet's replicatedJobs with the pod spec of each named one replaced."""
    out = []
    for rjob in replicated_jobs(job):
        rjob = copy.deepcopy(rjob)
        if rjob.get("name") in pod_specs:
            template = rjob.setdefault("template", {}).setdefault("spec", {})
            template.setdefault("template", {})["spec"] = pod_specs[rjob["name"]]
        out.append(rjob)
    return out


class JobSet:
    """The `JobKind` for JobSets."""

    resource: Resource = JOBSETS
    suspend_field: str = "spec.suspend"

    def queue_name(self, job: Obj) -> str | None:
        return workload.queue_name(job)

    def is_suspended(self, job: Obj) -> bool:
        return bool((job.get("spec") or {}).get("suspend"))

    def pod_sets(self, job: Obj) -> list[PodSet]:
        return [
            PodSet(
                str(rjob.get("name") or ""),
                replicated_job_pods(rjob),
                podtemplate.at_path(rjob, POD_TEMPLATE) or {},
                "replicas x parallelism, at most completions",
            )
            for rjob in replicated_jobs(job)
        ]

    def workload_name(self, job: Obj) -> str:
        meta = job["metadata"]
        return workload.workload_name_for("jobset", meta["name"], meta.get("uid", ""))

    def workload_spec(self, job: Obj) -> dict[str, Any]:
        return workload.workload_spec(job, self.pod_sets(job))

    def pod_priority_class(self, job: Obj) -> str | None:
        for ps in self.pod_sets(job):
            if found := podtemplate.priority_class(ps.template):
                return found
        return None

    def finished(self, job: Obj) -> Finished | None:
        status = job.get("status") or {}
        conditions = {
            c.get("type"): c for c in status.get("conditions") or () if c.get("status") == "True"
        }
        state = status.get("terminalState") or next(
            (t for t in ("Completed", "Failed") if t in conditions), None
        )
        if state == "Completed":
            message = (conditions.get("Completed") or {}).get("message")
            return Finished(
                True, names.REASON_FINISHED_SUCCEEDED, message or "JobSet completed successfully"
            )
        if state == "Failed":
            cond = conditions.get("Failed") or {}
            message = cond.get("message") or cond.get("reason")
            return Finished(False, names.REASON_FINISHED_FAILED, message or "JobSet failed")
        return None

    def pods_gone(self, job: Obj) -> bool:
        # `active` counts child Jobs with a pod pending or running (not terminating).
        return not any(
            int(s.get("active") or 0)
            for s in (job.get("status") or {}).get("replicatedJobsStatus") or ()
        )

    def can_restore(self, job: Obj) -> bool:
        # JobSet's webhook lets the scheduling fields change whenever it is (or gets) suspended.
        return self.is_suspended(job)

    def run_patch(
        self, job: Obj, pod_sets: Sequence[Obj], placements: Sequence[PodSetPlacement]
    ) -> dict[str, Any]:
        specs: dict[str, Obj] = {}
        for placement in placements:
            original = podtemplate.original_pod_spec(pod_sets, placement.name)
            selector = {**(original.get("nodeSelector") or {}), **node_selector(placement)}
            tolerations = list(original.get("tolerations") or [])
            tolerations += [dict(t) for t in placement.tolerations if dict(t) not in tolerations]
            current = podtemplate.at_path(self._rjob(job, placement.name), POD_TEMPLATE) or {}
            specs[placement.name] = _with_scheduling(
                current.get("spec") or {}, selector, tolerations
            )
        patch: dict[str, Any] = {"spec": {"suspend": False}}
        if specs:
            patch["spec"]["replicatedJobs"] = _replace_pod_specs(job, specs)
        return patch

    def suspend_patch(self, job: Obj) -> dict[str, Any]:
        return {"spec": {"suspend": True}}

    def restore_patch(self, job: Obj, pod_sets: Sequence[Obj]) -> dict[str, Any] | None:
        specs: dict[str, Obj] = {}
        for ps in pod_sets:
            name = str(ps.get("name") or "")
            original = podtemplate.original_pod_spec(pod_sets, name)
            current = (podtemplate.at_path(self._rjob(job, name), POD_TEMPLATE) or {}).get(
                "spec"
            ) or {}
            wanted = _with_scheduling(
                current, original.get("nodeSelector"), original.get("tolerations")
            )
            if wanted != current:
                specs[name] = wanted
        return {"spec": {"replicatedJobs": _replace_pod_specs(job, specs)}} if specs else None

    def suspend_ops(self, job: Obj) -> JsonPatch:
        return workload.suspend_ops_at(job, "suspend")

    @staticmethod
    def _rjob(job: Obj, name: str) -> Obj:
        return next((r for r in replicated_jobs(job) if r.get("name") == name), {})
