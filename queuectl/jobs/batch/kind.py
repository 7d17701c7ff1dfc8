"""batch/v1 Job as a `JobKind`: spec.suspend holds it, spec.template is its one pod set."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

from queuectl.api import names
from queuectl.api.resource import Obj, Resource
from queuectl.api.views import ObjectView
from queuectl.jobs import pinning, podtemplate, workload
from queuectl.jobs.kind import Finished, JsonPatch, PodSet, PodSetPlacement

JOBS: Final = Resource("batch", "v1", "jobs", True, "Job")
POD_SET: Final = "main"
TEMPLATE: Final = ("spec", "template")


def pod_count(job: Obj | None) -> int:
    """Pods running at once: parallelism (default 1), never more than completions."""
    spec = (job or {}).get("spec") or {}
    parallelism = spec.get("parallelism")
    count = 1 if parallelism is None else int(parallelism)
    completions = spec.get("completions")
    if completions is not None:
        count = min(count, int(completions))
    return count


def pin_source(job: Obj) -> pinning.IndexSource | None:
    """Where a pod finds its index when each index is one pod of the gang: an Indexed Job
    running all its completions at once. Otherwise (NonIndexed, or more completions than run
    at once) no index names a place, and the pods get only the pod set's domain."""
    spec = ObjectView(job).spec
    completions = spec.get("completions")
    if spec.get("completionMode") != "Indexed" or completions is None:
        return None
    return pinning.INDEXED_JOB if int(completions) == pod_count(job) else None


class BatchJob:
    """The `JobKind` for batch/v1 Jobs."""

    resource: Resource = JOBS
    suspend_field: str = "spec.suspend"

    def queue_name(self, job: Obj) -> str | None:
        return workload.queue_name(job)

    def is_suspended(self, job: Obj) -> bool:
        return bool(ObjectView(job).spec.get("suspend"))

    def pod_sets(self, job: Obj) -> list[PodSet]:
        template = podtemplate.at_path(job, TEMPLATE) or {}
        count_from = "parallelism, at most completions"
        return [PodSet(POD_SET, pod_count(job), template, count_from, ".".join(TEMPLATE))]

    def workload_name(self, job: Obj) -> str:
        meta = job["metadata"]
        return workload.workload_name_for("job", meta["name"], meta.get("uid", ""))

    def workload_spec(self, job: Obj) -> dict[str, Any]:
        return workload.workload_spec(job, self.pod_sets(job))

    def pod_priority_class(self, job: Obj) -> str | None:
        return podtemplate.priority_class(podtemplate.at_path(job, TEMPLATE) or {})

    def finished(self, job: Obj) -> Finished | None:
        for type_, cond in ObjectView(job).true_conditions.items():
            if type_ == "Complete":
                return Finished(
                    True,
                    names.REASON_FINISHED_SUCCEEDED,
                    cond.get("message") or "Job finished successfully",
                )
            if type_ == "Failed":
                return Finished(
                    False,
                    names.REASON_FINISHED_FAILED,
                    cond.get("message") or cond.get("reason") or "Job failed",
                )
        return None

    def pods_gone(self, job: Obj) -> bool:
        status = ObjectView(job).status
        return not status.get("active") and not status.get("terminating")

    def succeeded_pods(self, job: Obj) -> int:
        value = ObjectView(job).status.get("succeeded")
        return value if isinstance(value, int) and value > 0 else 0

    def can_restore(self, job: Obj) -> bool:
        # The API server lets scheduling directives change only on a suspended Job that has
        # not started; the Job controller clears startTime once it has suspended it.
        return self.is_suspended(job) and not ObjectView(job).status.get("startTime")

    def run_patch(
        self, job: Obj, pod_sets: Sequence[Obj], placements: Sequence[PodSetPlacement]
    ) -> dict[str, Any]:
        by_name = {p.name: p for p in placements}
        placement = by_name.get(POD_SET, PodSetPlacement(POD_SET))
        fragment = podtemplate.run_fragment(TEMPLATE, pod_sets, placement, pin_source(job))
        return podtemplate.deep_merge({"spec": {"suspend": False}}, fragment)

    def suspend_patch(self, job: Obj) -> dict[str, Any]:
        return {"spec": {"suspend": True}}

    def restore_patch(self, job: Obj, pod_sets: Sequence[Obj]) -> dict[str, Any] | None:
        return podtemplate.restore_fragment(job, TEMPLATE, pod_sets, POD_SET)

    def suspend_ops(self, job: Obj) -> JsonPatch:
        return workload.suspend_ops_at(job, "suspend")
