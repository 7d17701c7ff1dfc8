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

Its pods are owned by child Jobs that carry no queuectl label, so each template also gets the
`queuectl.io/workload` label: the controller then knows those pods as the Workload's (not as
foreign usage on their nodes) and finds the Workload from a pod on a failing node.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any, Final

from queuectl.api import names
from queuectl.api.resource import Obj, Resource
from queuectl.api.views import ObjectView
from queuectl.jobs import pinning, podtemplate, workload
from queuectl.jobs.batch import JOBS, BatchJob
from queuectl.jobs.kind import Finished, JsonPatch, PodSet, PodSetPlacement

JOBSETS: Final = Resource("jobset.x-k8s.io", "v1alpha2", "jobsets", True, "JobSet")
POD_TEMPLATE: Final = ("template", "spec", "template")
"""Where a replicated job keeps its pod template."""


def replicated_jobs(job: Obj) -> list[Obj]:
    return list(ObjectView(job).spec.get("replicatedJobs") or [])


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


def _with_labels(metadata: Obj, labels: Mapping[str, str] | None) -> dict[str, Any]:
    out = copy.deepcopy(dict(metadata))
    if labels:
        out["labels"] = dict(labels)
    else:
        out.pop("labels", None)
    return out


def _with_annotation(metadata: Obj, pins: str | None) -> dict[str, Any]:
    """`metadata` with the pod-pins annotation set to `pins` (absent when None)."""
    out = copy.deepcopy(dict(metadata))
    annotations = dict(out.get("annotations") or {})
    if pins:
        annotations[names.ANNOTATION_POD_PINS] = pins
    else:
        annotations.pop(names.ANNOTATION_POD_PINS, None)
    if annotations:
        out["annotations"] = annotations
    else:
        out.pop("annotations", None)
    return out


def pin_source(job: Obj, pod_set: str) -> pinning.IndexSource | None:
    """Where a pod of replicated job `pod_set` finds its index: its child Job's index
    (`jobset.sigs.k8s.io/job-index`) times the pods per Job, plus its completion index, when
    each child Job is Indexed (JobSet's default) and runs all its completions at once."""
    for rjob in replicated_jobs(job):
        if rjob.get("name") != pod_set:
            continue
        job_spec = podtemplate.at_path(rjob, ("template", "spec")) or {}
        per_job = replicated_job_pods({**rjob, "replicas": 1})
        completions = job_spec.get("completions")
        if job_spec.get("completionMode", "Indexed") != "Indexed" or (
            completions is not None and int(completions) != per_job
        ):
            return None
        return pinning.IndexSource(
            names.LABEL_JOB_COMPLETION_INDEX, names.LABEL_JOBSET_JOB_INDEX, per_job
        )
    return None


def _replace_templates(job: Obj, templates: Mapping[str, Obj]) -> list[Obj]:
    """The JobSet's replicatedJobs with the pod template of each named one replaced."""
    out = []
    for rjob in replicated_jobs(job):
        rjob = copy.deepcopy(rjob)
        if rjob.get("name") in templates:
            rjob.setdefault("template", {}).setdefault("spec", {})["template"] = templates[
                rjob["name"]
            ]
        out.append(rjob)
    return out


def is_kind(obj: Obj, resource: Resource) -> bool:
    """Whether `obj` (its apiVersion and kind) is of `resource`."""
    group = str(obj.get("apiVersion") or "").rpartition("/")[0]
    return obj.get("kind") == resource.kind and group == resource.group


class JobSet:
    """The `JobKind` (and `MakesChildren`) for JobSets."""

    resource: Resource = JOBSETS
    suspend_field: str = "spec.suspend"
    children: tuple[Resource, ...] = (JOBS,)

    def queue_name(self, job: Obj) -> str | None:
        return workload.queue_name(job)

    def is_suspended(self, job: Obj) -> bool:
        return bool(ObjectView(job).spec.get("suspend"))

    def pod_sets(self, job: Obj) -> list[PodSet]:
        return [
            PodSet(
                str(rjob.get("name") or ""),
                replicated_job_pods(rjob),
                podtemplate.at_path(rjob, POD_TEMPLATE) or {},
                "replicas x parallelism, at most completions",
                f"spec.replicatedJobs[{i}].template.spec.template",
            )
            for i, rjob in enumerate(replicated_jobs(job))
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
        view = ObjectView(job)
        status, conditions = view.status, view.true_conditions
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
            for s in ObjectView(job).status.get("replicatedJobsStatus") or ()
        )

    def can_restore(self, job: Obj) -> bool:
        # JobSet's webhook lets the scheduling fields change whenever it is (or gets) suspended.
        return self.is_suspended(job)

    def run_patch(
        self, job: Obj, pod_sets: Sequence[Obj], placements: Sequence[PodSetPlacement]
    ) -> dict[str, Any]:
        workload_label = {names.LABEL_WORKLOAD: self._workload(job)}
        templates: dict[str, Obj] = {}
        for ps in self.pod_sets(job):
            by_name = {p.name: p for p in placements}
            placement = by_name.get(ps.name, PodSetPlacement(ps.name))
            original = podtemplate.original_pod_spec(pod_sets, ps.name)
            selector = {**(original.get("nodeSelector") or {}), **node_selector(placement)}
            tolerations = list(original.get("tolerations") or [])
            tolerations += [dict(t) for t in placement.tolerations if dict(t) not in tolerations]
            meta = _with_labels(
                ps.template.get("metadata") or {},
                {**(ps.template.get("metadata") or {}).get("labels", {}), **workload_label},
            )
            source = pin_source(job, ps.name)
            pins = pinning.annotation(placement, source) if source is not None else None
            meta = _with_annotation(meta, pins)
            templates[ps.name] = {
                **ps.template,
                "metadata": meta,
                "spec": _with_scheduling(ps.template.get("spec") or {}, selector, tolerations),
            }
        patch: dict[str, Any] = {"spec": {"suspend": False}}
        if templates:
            patch["spec"]["replicatedJobs"] = _replace_templates(job, templates)
        return patch

    def suspend_patch(self, job: Obj) -> dict[str, Any]:
        return {"spec": {"suspend": True}}

    def restore_patch(self, job: Obj, pod_sets: Sequence[Obj]) -> dict[str, Any] | None:
        templates: dict[str, Obj] = {}
        for ps in self.pod_sets(job):
            recorded = next((p for p in pod_sets if p.get("name") == ps.name), None)
            if recorded is None:
                continue
            original = (recorded.get("template") or {}).get("spec") or {}
            original_labels = ((recorded.get("template") or {}).get("metadata") or {}).get("labels")
            current = ps.template
            wanted = {
                **current,
                "metadata": _with_annotation(
                    _with_labels(current.get("metadata") or {}, original_labels), None
                ),
                "spec": _with_scheduling(
                    current.get("spec") or {},
                    original.get("nodeSelector"),
                    original.get("tolerations"),
                ),
            }
            if not wanted["metadata"]:
                del wanted["metadata"]
            if wanted != current:
                templates[ps.name] = wanted
        if not templates:
            return None
        return {"spec": {"replicatedJobs": _replace_templates(job, templates)}}

    def suspend_ops(self, job: Obj) -> JsonPatch:
        return workload.suspend_ops_at(job, "suspend")

    def child_pod_sets(self, job: Obj, child: Obj) -> list[tuple[PodSet, PodSet]] | None:
        """A child Job `<jobset>-<replicated job>-<index>` (index below its replicas) runs
        one Job's worth of its replicated job: min(parallelism, completions) pods."""
        if not is_kind(child, JOBS):
            return None
        prefix = f"{(job.get('metadata') or {}).get('name')}-"
        name = ObjectView(child).name
        for i, rjob in enumerate(replicated_jobs(job)):
            start = f"{prefix}{rjob.get('name')}-"
            index, replicas = name[len(start) :], rjob.get("replicas")
            if not (name.startswith(start) and index.isdigit()):
                continue
            if int(index) >= (1 if replicas is None else int(replicas)):
                return None
            parent = PodSet(
                str(rjob.get("name") or ""),
                replicated_job_pods({**rjob, "replicas": 1}),
                podtemplate.at_path(rjob, POD_TEMPLATE) or {},
                "parallelism, at most completions",
                f"spec.replicatedJobs[{i}].template.spec.template",
            )
            return [(BatchJob().pod_sets(child)[0], parent)]
        return None

    def _workload(self, job: Obj) -> str:
        """The Workload's name: the label the controller put on the JobSet, else its own."""
        found = ObjectView(job).labels.get(names.LABEL_WORKLOAD)
        return found or self.workload_name(job)
