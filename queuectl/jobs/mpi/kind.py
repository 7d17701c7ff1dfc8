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
from typing import Any, ClassVar, Final

from queuectl.api import names
from queuectl.api.resource import Obj, Resource
from queuectl.api.views import ObjectView
from queuectl.jobs import podtemplate as pt
from queuectl.jobs.batch import JOBS, BatchJob
from queuectl.jobs.jobset.kind import is_kind
from queuectl.jobs.kind import PodSet, PodSetPlacement
from queuectl.jobs.kubeflow import ReplicaSpecsKind

MPI_JOBS: Final = Resource("kubeflow.org", "v2beta1", "mpijobs", True, "MPIJob")
REPLICAS: Final[tuple[str, ...]] = ("spec", "mpiReplicaSpecs")
RUN_POLICY: Final = ("spec", "runPolicy")
LAUNCHER: Final = "launcher"
ROLES: Final[dict[str, str]] = {LAUNCHER: "Launcher", "worker": "Worker"}
"""Pod set name -> replica type, in the order the pod sets are listed."""
DEFAULT_REPLICAS: Final[dict[str, int]] = {"Launcher": 1, "Worker": 0}
"""mpi-operator's defaults (v2beta1 SetDefaults_MPIJob): a worker spec without replicas runs
none."""
LAUNCHER_SUFFIX: Final = "-launcher"
JOB_TEMPLATE: Final = ("spec", "template")


def launcher_job_name(job: Obj) -> str:
    """The batch Job mpi-operator runs the launcher in."""
    return f"{job['metadata']['name']}{LAUNCHER_SUFFIX}"


def _controlled_by(child: Obj, job: Obj) -> bool:
    ref = ObjectView(child).controller_ref or {}
    uid = ObjectView(job).meta.get("uid")
    return bool(uid) and ref.get("uid") == uid and ref.get("kind") == MPI_JOBS.kind


class MPIJob(ReplicaSpecsKind):
    """The `JobKind` (and `MakesChildren`, `FreezesFields`, `PlacesChildren`) for MPIJobs; the
    replica specs, suspend and finish are the Kubeflow kinds' shared base (`jobs/kubeflow.py`).
    Suspending, mpi-operator deletes the workers and suspends the launcher's Job, whose pods
    the Job controller deletes: `pods_gone` reads both from the replica statuses."""

    resource: Resource = MPI_JOBS
    children: tuple[Resource, ...] = (JOBS,)
    REPLICAS: ClassVar[tuple[str, ...]] = REPLICAS
    ROLES: ClassVar[dict[str, str]] = ROLES
    DEFAULT_REPLICAS: ClassVar[dict[str, int]] = DEFAULT_REPLICAS
    WORKLOAD_PREFIX: ClassVar[str] = "mpijob"
    KIND_WORDS: ClassVar[str] = "MPIJob"

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
