"""The one interface every job kind implements: what the controller and the webhooks ask of it.

A kind (batch Job, JobSet, a PyTorchJob ...) is one class that satisfies `JobKind`, registered
once in queuectl/jobs/registry.py; each operator's kinds share one package under queuectl/jobs/
(one package per operator, one class per kind: ray/ holds RayJob and RayCluster). The controller's
reconcile loop and the admission webhooks speak only this interface, so adding a kind never
changes either (docs/design/jobs.md).

Every method is pure: it reads the job as a plain dict (as the API server returns it) and
returns data or a patch; the controller and the webhooks do the I/O.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from queuectl.api.resource import Obj, Resource

JsonPatch = list[dict[str, Any]]
"""RFC 6902 operations, as an admission response carries them."""


@dataclass(frozen=True)
class PodSet:
    """One role of a job (a Job's pods, a JobSet's replicated job, a leader or its workers):
    `count` identical pods from one `template`. One pod set per role, in a stable order."""

    name: str
    count: int
    template: Mapping[str, Any]
    """The pod template (metadata and spec) as the job holds it."""
    count_from: str = "replicas"
    """The field(s) `count` comes from, in words, for messages: 'parallelism, at most
    completions'."""
    path: str = ""
    """Where `template` sits in the job, as a user writes a field path
    ('spec.template', 'spec.replicatedJobs[0].template.spec.template'): refusals of a frozen
    field name it. Empty: messages say 'pod set NAME's template' instead."""


@dataclass(frozen=True)
class PodPin:
    """Consecutive pods of a pod set pinned to one place: `count` pods, each on a node whose
    labels carry these values (every topology level the core placed them by, down to the node
    where the Topology names hosts)."""

    count: int
    labels: Mapping[str, str]


@dataclass(frozen=True)
class PodSetPlacement:
    """What admission decided for one pod set, in the shape a pod template needs."""

    name: str
    node_labels: Mapping[str, str] = field(default_factory=dict)
    """The chosen flavors' nodeLabels: required node affinity `key In [value]`."""
    tolerations: tuple[Mapping[str, Any], ...] = ()
    """The chosen flavors' tolerations, as core/v1 Toleration dicts."""
    domain: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    """Topology: node label -> the values allowed (the chosen domain, or the nodes used)."""
    gpu_resource: str | None = None
    """The device that serves nvidia.com/gpu in the chosen flavor (a MIG slice): the containers
    ask for it instead (docs/design/gpu-sharing.md)."""
    pins: tuple[PodPin, ...] = ()
    """Per pod, in pod order (pod index i is the pin covering position i): where the core put
    each pod of a pod set placed in slices or balanced. Empty for any other pod set. A kind
    whose pods have stable indexes carries them to its pods (jobs/pinning.py)."""


@dataclass(frozen=True)
class Finished:
    """A job's terminal state, copied onto its Workload's Finished condition."""

    succeeded: bool
    reason: str
    message: str


class JobKind(Protocol):
    """A job kind as queuectl sees it: how to read one, and how to hold, start and stop it."""

    resource: Resource
    """Where the kind lives (group, version, plural, Kind): what is watched, patched, and
    matched by the webhook rules and the controller's RBAC."""

    suspend_field: str
    """The field that holds the job back, as a user writes it ('spec.suspend'): refusals
    name it."""

    # --- reading (controller and webhooks) -------------------------------------------------
    def queue_name(self, job: Obj) -> str | None:
        """The LocalQueue the job asks for (its queue label), None when it is not queued."""
        ...

    def is_suspended(self, job: Obj) -> bool:
        """Whether the job is held back: no pod of it may start."""
        ...

    def pod_sets(self, job: Obj) -> list[PodSet]:
        """Its roles, one pod set each: how many pods run at once and from which template.
        What quota is sized for; the webhooks refuse a change to it while the job is admitted."""
        ...

    # --- the controller's half --------------------------------------------------------------
    def workload_name(self, job: Obj) -> str:
        """A deterministic, label-safe name for the job's Workload (`workload_name_for`)."""
        ...

    def workload_spec(self, job: Obj) -> dict[str, Any]:
        """podSets (from `pod_sets`, one per role), queueName, priorityClassName (not yet the
        numeric priority), maximumExecutionTimeSeconds: the Workload spec this job asks for
        (`workload.workload_spec` builds it)."""
        ...

    def pod_priority_class(self, job: Obj) -> str | None:
        """The pod templates' priorityClassName, the fallback source of priority."""
        ...

    def finished(self, job: Obj) -> Finished | None:
        """Set when the job has reached a terminal state."""
        ...

    def pods_gone(self, job: Obj) -> bool:
        """No pod of the job is running or terminating: its quota can be released."""
        ...

    def can_restore(self, job: Obj) -> bool:
        """Whether the pod templates may be changed now (suspended and not started)."""
        ...

    def run_patch(
        self, job: Obj, pod_sets: Sequence[Obj], placements: Sequence[PodSetPlacement]
    ) -> dict[str, Any]:
        """A merge patch that injects each pod set's placement into its template (over the
        Workload's original `pod_sets`, so injecting twice never stacks) and unsuspends."""
        ...

    def suspend_patch(self, job: Obj) -> dict[str, Any]:
        """A merge patch that suspends the job."""
        ...

    def restore_patch(self, job: Obj, pod_sets: Sequence[Obj]) -> dict[str, Any] | None:
        """A merge patch that puts back the templates of the Workload's original `pod_sets`
        (removing what run_patch injected); None when nothing differs."""
        ...

    # --- the webhooks' half ------------------------------------------------------------------
    def suspend_ops(self, job: Obj) -> JsonPatch:
        """JSON patch ops that create the job suspended; empty when it already is."""
        ...


# --- optional: a kind whose pod sets sit partly in another object ----------------------------
@dataclass(frozen=True)
class InputRef:
    """The object a job names and reads its pod sets from (a TrainJob's runtime)."""

    resource: Resource
    namespace: str
    """"" for a cluster-scoped object."""
    name: str


class MissingInput(Exception):
    """The object a job names does not exist (or cannot be read): the job cannot be queued.
    The message says which object and what to do; the webhook refuses the job with it."""


@runtime_checkable
class ReadsInputs(Protocol):
    """Beside `JobKind`, for a kind whose pod sets are not all in the job (a TrainJob's are in
    its TrainingRuntime). The mutating webhook copies what is needed into the job once, on
    CREATE (`snapshot_ops`, from the controller's cache of `inputs`); from then on every
    `JobKind` method reads the job alone (docs/design/jobs.md, "Kubeflow TrainJob")."""

    inputs: tuple[Resource, ...]
    """What the controller's cache watches (once served) and its RBAC may read."""

    def input_ref(self, job: Obj) -> InputRef:
        """The object this job reads its pod sets from."""
        ...

    def snapshot_ops(self, job: Obj, found: Obj | None) -> JsonPatch:
        """JSON patch ops recording what the job needs of `found` (the object `input_ref`
        names, None when absent); empty when the job already records exactly that. Raises
        `MissingInput` when `found` is None."""
        ...

    def problems(self, old: Obj | None, new: Obj) -> list[str]:
        """The kind's own refusals of a user's CREATE (old None) or UPDATE: an edited
        snapshot, a queue label where it queues nothing."""
        ...


# --- optional: fields outside the pod templates that decide what runs ------------------------
@runtime_checkable
class FreezesFields(Protocol):
    """Beside `JobKind`, for a kind with fields outside its pod templates that decide what runs
    or where (a TrainJob's runtimeRef): frozen while its Workload holds quota, like the pod
    sets' counts, resources and placement (`jobs/frozen.py`)."""

    def frozen_fields(self, job: Obj) -> Mapping[str, Any]:
        """Field path, as a user writes it -> its value."""
        ...


# --- optional: a kind whose operator makes objects of registered kinds -----------------------
@runtime_checkable
class MakesChildren(Protocol):
    """Beside `JobKind`, for a kind whose operator creates objects of other registered kinds
    (a JobSet's Jobs, a RayJob's RayCluster and submitter Job, a TrainJob's JobSet). Such a
    child is passed through by the webhooks as part of its owner's Workload only when the
    owner it names exists with that uid and is queued (`registry.controlled_by`); and what
    the child runs must stay what its owner says (`frozen.child_problems`)."""

    children: tuple[Resource, ...]
    """The resources of the objects this kind's operator creates."""

    def child_pod_sets(self, job: Obj, child: Obj) -> list[tuple[PodSet, PodSet]] | None:
        """Each pod set of `child` (as the child's own kind reads it, `path` in the child)
        with the pod set of this job it is made from, as the operator renders it now: the
        child must agree with it. None when this job makes no such child (another name, a
        replicated job or worker group it does not have, an index past its replicas)."""
        ...


# --- optional: pods that already finished their part ----------------------------------------
@runtime_checkable
class CountsSucceeded(Protocol):
    """Beside `JobKind`, for a kind whose status counts the pods that already succeeded (a
    Job's completions): they count as Ready for the pods-ready timeouts, so a gang that
    finishes one pod at a time never reads as broken. Without it only Ready pods count."""

    def succeeded_pods(self, job: Obj) -> int:
        """Pods of `job` that ended successfully (and so left the running pods)."""
        ...


# --- optional: a child the operator does not place on resume --------------------------------
@runtime_checkable
class PlacesChildren(Protocol):
    """Beside `MakesChildren`, for a kind whose operator makes a child while the job waits and
    does not carry the job's placement into it when the job starts (mpi-operator v0.6.0 makes
    an MPIJob's launcher Job at once, suspended, and on resume only unsuspends it). Before it
    starts the job, the controller patches each such child that exists (it is suspended with
    the job, so the API server lets its scheduling directives change)."""

    def placed_children(self, job: Obj) -> tuple[tuple[Resource, str], ...]:
        """The children to place: resource and name, in the job's namespace."""
        ...

    def child_run_patch(
        self,
        job: Obj,
        child: Obj,
        pod_sets: Sequence[Obj],
        placements: Sequence[PodSetPlacement],
    ) -> dict[str, Any] | None:
        """A merge patch placing `child` as `run_patch` places the job (over the Workload's
        original `pod_sets`); None when it already is placed so, or when `job` does not
        control it."""
        ...
