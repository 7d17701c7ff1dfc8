"""MPIJob (kubeflow.org/v2beta1, mpi-operator v0.6.0) as a `JobKind`: the Launcher and the
Worker replica specs are pod sets (`launcher`, `worker`) of one gang, spec.runPolicy.suspend
holds it.

mpi-operator runs the workers as pods it owns and the launcher as a batch Job it owns
(`<name>-launcher`). It makes that Job as soon as it first sees the MPIJob, suspended with it,
and on resume only unsuspends it: the placement written into the MPIJob's launcher template at
admission never reaches it (kubeflow/mpi-operator#770, fixed after v0.7.0). So the kind also
places that child itself (`PlacesChildren`): the controller patches the suspended launcher Job
before it unsuspends the MPIJob (docs/design/jobs.md, "MPIJob").
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

from queuectl.api import names
from queuectl.api.resource import Obj, Resource
from queuectl.api.views import ObjectView
from queuectl.jobs import podtemplate as pt
from queuectl.jobs import workload as wl
from queuectl.jobs.batch import JOBS, BatchJob
from queuectl.jobs.jobset.kind import is_kind
from queuectl.jobs.kind import Finished, JsonPatch, PodSet, PodSetPlacement

MPI_JOBS: Final = Resource("kubeflow.org", "v2beta1", "mpijobs", True, "MPIJob")
REPLICAS: Final = ("spec", "mpiReplicaSpecs")
RUN_POLICY: Final = ("spec", "runPolicy")
LAUNCHER: Final = "launcher"
ROLES: Final = {LAUNCHER: "Launcher", "worker": "Worker"}
"""Pod set name -> replica type, in the order the pod sets are listed."""
DEFAULT_REPLICAS: Final = {"Launcher": 1, "Worker": 0}
"""mpi-operator's defaults (v2beta1 SetDefaults_MPIJob): a worker spec without replicas runs
none."""
LAUNCHER_SUFFIX: Final = "-launcher"
JOB_TEMPLATE: Final = ("spec", "template")


def _template_path(replica_type: str) -> tuple[str, ...]:
    return (*REPLICAS, replica_type, "template")


def launcher_job_name(job: Obj) -> str:
    """The batch Job mpi-operator runs the launcher in."""
    return f"{job['metadata']['name']}{LAUNCHER_SUFFIX}"


def _controlled_by(child: Obj, job: Obj) -> bool:
    ref = ObjectView(child).controller_ref or {}
    uid = ObjectView(job).meta.get("uid")
    return bool(uid) and ref.get("uid") == uid and ref.get("kind") == MPI_JOBS.kind


class MPIJob:
    """The `JobKind` (and `MakesChildren`, `FreezesFields`, `PlacesChildren`) for MPIJobs."""

    resource: Resource = MPI_JOBS
    suspend_field: str = "spec.runPolicy.suspend"
    children: tuple[Resource, ...] = (JOBS,)

    def _roles(self, job: Obj) -> list[tuple[str, str]]:
        specs = pt.at_path(job, REPLICAS) or {}
        return [(name, rtype) for name, rtype in ROLES.items() if rtype in specs]

    def queue_name(self, job: Obj) -> str | None:
        return wl.queue_name(job)

    def is_suspended(self, job: Obj) -> bool:
        return bool(pt.at_path(job, (*RUN_POLICY, "suspend")))

    def pod_sets(self, job: Obj) -> list[PodSet]:
        specs = pt.at_path(job, REPLICAS) or {}
        out = []
        for name, rtype in self._roles(job):
            spec = specs[rtype] or {}
            replicas = spec.get("replicas")
            out.append(
                PodSet(
                    name,
                    DEFAULT_REPLICAS[rtype] if replicas is None else int(replicas),
                    spec.get("template") or {},
                    f"mpiReplicaSpecs.{rtype}.replicas",
                    ".".join(_template_path(rtype)),
                )
            )
        return out

    def workload_name(self, job: Obj) -> str:
        meta = job["metadata"]
        return wl.workload_name_for("mpijob", meta["name"], meta.get("uid", ""))

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
            msg = c.get("message") or "MPIJob succeeded"
            return Finished(True, names.REASON_FINISHED_SUCCEEDED, msg)
        if (c := conds.get("Failed")) is not None:
            msg = c.get("message") or c.get("reason") or "MPIJob failed"
            return Finished(False, names.REASON_FINISHED_FAILED, msg)
        return None

    def pods_gone(self, job: Obj) -> bool:
        # Suspending, mpi-operator deletes the workers, zeroes the Worker's `active` and sets
        # Suspended in one status write; the launcher's `active` counts its Job's running
        # pods, which the Job controller deletes once mpi-operator suspends that Job.
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
            fragments.append(
                pt.run_fragment(path, pod_sets, by_name.get(role, PodSetPlacement(role)))
            )
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

    # --- FreezesFields -------------------------------------------------------------------------
    def frozen_fields(self, job: Obj) -> dict[str, Any]:
        """Who runs it: with another managedBy mpi-operator ignores the MPIJob, so a suspend
        would no longer stop its pods."""
        return {"spec.runPolicy.managedBy": pt.at_path(job, (*RUN_POLICY, "managedBy"))}

    # --- MakesChildren -------------------------------------------------------------------------
    def child_pod_sets(self, job: Obj, child: Obj) -> list[tuple[PodSet, PodSet]] | None:
        """mpi-operator makes one batch Job, `<name>-launcher`, from the launcher template."""
        if not is_kind(child, JOBS) or ObjectView(child).meta.get("name") != launcher_job_name(job):
            return None
        launcher = [ps for ps in self.pod_sets(job) if ps.name == LAUNCHER]
        if not launcher:
            return None
        return [(BatchJob().pod_sets(child)[0], launcher[0])]

    # --- PlacesChildren ------------------------------------------------------------------------
    def placed_children(self, job: Obj) -> tuple[tuple[Resource, str], ...]:
        if not any(role == LAUNCHER for role, _ in self._roles(job)):
            return ()
        return ((JOBS, launcher_job_name(job)),)

    def child_run_patch(
        self,
        job: Obj,
        child: Obj,
        pod_sets: Sequence[Obj],
        placements: Sequence[PodSetPlacement],
    ) -> dict[str, Any] | None:
        """The launcher Job's template placed as `run_patch` places the MPIJob's launcher
        template: node affinity and tolerations as the Workload recorded them plus the
        placement (so an earlier admission's placement is replaced, not merged with), and the
        Workload label. None when it already is, or when this MPIJob does not control it."""
        if not _controlled_by(child, job):
            return None
        placement = next((p for p in placements if p.name == LAUNCHER), PodSetPlacement(LAUNCHER))
        original = pt.original_pod_spec(pod_sets, LAUNCHER)
        spec = pt.deep_merge(pt.restore(original), pt.inject(original, placement))
        spec.pop("containers", None)  # a launcher's GPUs stay as written (docs: not done)
        labels = {names.LABEL_WORKLOAD: self.workload_name(job)}
        current = pt.at_path(child, JOB_TEMPLATE) or {}
        if _placement(current) == _placement({"metadata": {"labels": labels}, "spec": spec}):
            return None
        return pt.merge_at(JOB_TEMPLATE, {"metadata": {"labels": labels}, "spec": spec})


def _placement(template: Obj) -> tuple[Any, Any, Any]:
    """What `child_run_patch` writes, as a template holds it (absent and empty alike)."""
    spec = template.get("spec") or {}
    required = ((spec.get("affinity") or {}).get("nodeAffinity") or {}).get(pt.AFFINITY_KEY)
    label = ObjectView(template).labels.get(names.LABEL_WORKLOAD)
    return required or None, spec.get("tolerations") or None, label
