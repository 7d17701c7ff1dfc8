"""Workload: the unit of admission, one per job (or created directly), admitted as a whole."""

from __future__ import annotations

from datetime import datetime
from itertools import pairwise
from typing import Annotated, Any, Final, Literal

from pydantic import ConfigDict, Field, model_validator

from queuectl.api import names
from queuectl.api.admissioncheck import MAX_CHECKS, AdmissionCheckState
from queuectl.api.base import (
    INT32_MAX,
    MAX_NAME_LENGTH,
    Condition,
    KubeModel,
    Resource,
    Rule,
    cel_rules,
    conditions_field,
    is_true,
)
from queuectl.api.quantity import Quantity
from queuectl.api.quota import ObjectName

MAX_POD_SETS: Final = 8
MAX_RESOURCES: Final = 16
MAX_TOPOLOGY_DOMAINS: Final = 10_000
MAX_TOPOLOGY_LEVELS: Final = 8
DNS_LABEL_PATTERN: Final = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
DEFAULT_POD_SET: Final = "main"

ONE_TOPOLOGY_MODE: Final = Rule(
    "!(has(self.required) && has(self.preferred))",
    "set either required or preferred, not both",
)
MAX_SLICE_LEVELS: Final = 3
_SLICES: Final = "self.podSetSliceRequiredTopologyConstraints"
SLICE_LEVELS_UNIQUE: Final = Rule(
    f"!has({_SLICES}) || {_SLICES}.all(c, {_SLICES}.filter(d, d.topology == c.topology)"
    ".size() == 1)",
    "a slice level is listed more than once in podSetSliceRequiredTopologyConstraints; list "
    "each topology level once, outermost first",
)
SLICE_SIZES_DIVIDE: Final = Rule(
    f"!has({_SLICES}) || {_SLICES}.size() < 2 || ({_SLICES}[0].size % {_SLICES}[1].size == 0 "
    f"&& ({_SLICES}.size() < 3 || {_SLICES}[1].size % {_SLICES}[2].size == 0))",
    "each slice size in podSetSliceRequiredTopologyConstraints must divide the one before it "
    "(outermost first, e.g. 16 per rack then 4 per NVLink domain); fix the sizes or the order",
)
HOSTNAME_SLICE_INNERMOST: Final = Rule(
    f"!has({_SLICES}) || {_SLICES}.all(c, c.topology != '{names.LABEL_HOSTNAME}' || "
    f"c == {_SLICES}[{_SLICES}.size() - 1])",
    f"{names.LABEL_HOSTNAME} can only be the last (innermost) slice level",
)
WHOLE_SLICES: Final = Rule(
    "!has(self.topologyRequest) || "
    "!has(self.topologyRequest.podSetSliceRequiredTopologyConstraints) || "
    "self.count % self.topologyRequest.podSetSliceRequiredTopologyConstraints[0].size == 0",
    "count must be a whole number of outermost slices: make it a multiple of the first "
    "podSetSliceRequiredTopologyConstraints size",
)
POD_SET_NAMES_UNIQUE: Final = Rule(
    "self.podSets.all(p, self.podSets.filter(x, x.name == p.name).size() == 1)",
    "podSets names must be unique; give each pod set its own name",
)

_HOLDS_QUOTA: Final = "has(oldSelf.status) && has(oldSelf.status.admission)"
QUEUE_FIXED_WHILE_RESERVED: Final = Rule(
    f"!({_HOLDS_QUOTA}) || (has(self.spec.queueName) == has(oldSelf.spec.queueName) && "
    "(!has(self.spec.queueName) || self.spec.queueName == oldSelf.spec.queueName))",
    "queueName cannot change while the workload holds quota; deactivate it (spec.active: false) "
    "and wait for the quota to be released first",
)
POD_SETS_FIXED_WHILE_RESERVED: Final = Rule(
    f"!({_HOLDS_QUOTA}) || self.spec.podSets == oldSelf.spec.podSets",
    "podSets cannot change while the workload holds quota: the admitted quota was sized for them",
)

PodSetName = Annotated[str, Field(min_length=1, max_length=63, pattern=DNS_LABEL_PATTERN)]
LabelKey = Annotated[str, Field(min_length=1, max_length=MAX_NAME_LENGTH)]


class PodSetSliceConstraint(KubeModel):
    """Slices of `size` pods of the pod set, each inside ONE domain of the `topology` level."""

    topology: LabelKey
    size: int = Field(ge=1, le=INT32_MAX)


class PodSetTopologyRequest(KubeModel):
    """Keep a pod set inside one domain of a topology level, and its slices in finer ones."""

    model_config = ConfigDict(
        json_schema_extra=cel_rules(
            ONE_TOPOLOGY_MODE, SLICE_LEVELS_UNIQUE, SLICE_SIZES_DIVIDE, HOSTNAME_SLICE_INNERMOST
        )
    )

    required: LabelKey | None = None
    """All pods in ONE domain of this level, or no admission."""
    preferred: LabelKey | None = None
    """As close as possible, falling back to coarser levels."""
    podSetGroupName: PodSetName | None = None
    """Pod sets naming the same group share ONE domain of their level (a master and workers)."""
    pod_set_slice_required_topology_constraints: list[PodSetSliceConstraint] | None = Field(
        default=None, min_length=1, max_length=MAX_SLICE_LEVELS
    )
    """Up to 3 slice levels, outermost first; each size divides the one before it."""
    balanced_placement: bool | None = None
    """Spread the pods (or slices) as evenly as the chosen domains allow, instead of packing."""

    @model_validator(mode="after")
    def _check(self) -> PodSetTopologyRequest:
        if self.required is not None and self.preferred is not None:
            raise ValueError(ONE_TOPOLOGY_MODE.message)
        slices = self.pod_set_slice_required_topology_constraints or []
        levels = [c.topology for c in slices]
        if len(set(levels)) != len(levels):
            raise ValueError(SLICE_LEVELS_UNIQUE.message)
        if any(a.size % b.size for a, b in pairwise(slices)):
            raise ValueError(SLICE_SIZES_DIVIDE.message)
        if names.LABEL_HOSTNAME in levels[:-1]:
            raise ValueError(HOSTNAME_SLICE_INNERMOST.message)
        return self


class PodSet(KubeModel):
    """Identical pods of a workload: count copies of template."""

    model_config = ConfigDict(json_schema_extra=cel_rules(WHOLE_SLICES))

    name: PodSetName = DEFAULT_POD_SET
    count: int = Field(default=1, ge=0, le=INT32_MAX)
    template: dict[str, Any] = Field(
        json_schema_extra={"x-kubernetes-preserve-unknown-fields": True}
    )
    """A core/v1 PodTemplateSpec; its containers' requests are what the gang asks for."""
    topology_request: PodSetTopologyRequest | None = None

    @model_validator(mode="after")
    def _check(self) -> PodSet:
        slices = (
            self.topology_request
            and self.topology_request.pod_set_slice_required_topology_constraints
        )
        if slices and self.count % slices[0].size:
            raise ValueError(WHOLE_SLICES.message)
        return self


class WorkloadSpec(KubeModel):
    """What to admit (pod sets), where to queue it, and at which priority."""

    model_config = ConfigDict(json_schema_extra=cel_rules(POD_SET_NAMES_UNIQUE))

    pod_sets: list[PodSet] = Field(min_length=1, max_length=MAX_POD_SETS)
    queue_name: ObjectName | None = None
    """The LocalQueue in the workload's namespace."""
    priority_class_name: ObjectName | None = None
    """A WorkloadPriorityClass (or, failing that, a scheduling.k8s.io PriorityClass)."""
    priority: int | None = Field(default=None, ge=-INT32_MAX, le=INT32_MAX)
    """Resolved from the priority class when the workload is created."""
    active: bool = True
    """False deactivates it: not admitted, and evicted if running."""
    maximum_execution_time_seconds: int | None = Field(default=None, ge=1)
    """Admitted time after which the workload is deactivated."""

    @model_validator(mode="after")
    def _check(self) -> WorkloadSpec:
        pod_set_names = [p.name for p in self.pod_sets]
        if len(set(pod_set_names)) != len(pod_set_names):
            raise ValueError(POD_SET_NAMES_UNIQUE.message)
        return self


class TopologyDomainAssignment(KubeModel):
    """count pods go to the domain named by values (one value per assigned level)."""

    values: list[str] = Field(min_length=1, max_length=MAX_TOPOLOGY_LEVELS)
    count: int = Field(ge=1, le=INT32_MAX)


class TopologyAssignment(KubeModel):
    """Where the pods of a pod set go, as domains of the listed levels."""

    levels: list[LabelKey] = Field(min_length=1, max_length=MAX_TOPOLOGY_LEVELS)
    domains: list[TopologyDomainAssignment] = Field(max_length=MAX_TOPOLOGY_DOMAINS)


class PodSetAssignment(KubeModel):
    """The flavor per resource, the quota taken and the placement of one pod set."""

    name: PodSetName
    flavors: dict[str, str] = Field(default_factory=dict, max_length=MAX_RESOURCES)
    """Resource name -> ResourceFlavor name."""
    resource_usage: dict[str, Quantity] = Field(default_factory=dict, max_length=MAX_RESOURCES)
    """Resource name -> total quota taken by all pods of the set."""
    count: int = Field(ge=0, le=INT32_MAX)
    topology_assignment: TopologyAssignment | None = None


class Admission(KubeModel):
    """Quota reserved in a ClusterQueue for this workload."""

    cluster_queue: ObjectName
    pod_set_assignments: list[PodSetAssignment] = Field(min_length=1, max_length=MAX_POD_SETS)


class RequeueState(KubeModel):
    """Backoff after an eviction."""

    count: int = Field(default=0, ge=0)
    requeue_at: datetime | None = None


class PreemptionNotice(KubeModel):
    """Set on a victim: who preempts it and when its Job gets suspended."""

    preemptor: str = Field(max_length=2 * MAX_NAME_LENGTH + 1)
    """namespace/name of the workload that needs the quota."""
    deadline: datetime
    reason: str | None = Field(default=None, max_length=64)


class NodeGpuUse(KubeModel):
    """The latest GPU-use report counted from one node (its agent's window end)."""

    name: str = Field(max_length=253)
    report_time: datetime
    gpus: int = Field(ge=0, le=INT32_MAX)
    utilization_percent: int = Field(ge=0, le=100)


class GpuUsage(KubeModel):
    """What the workload's GPUs did, from the node agents' reports (controller-written)."""

    gpus: int = Field(default=0, ge=0, le=INT32_MAX)
    """GPUs its containers held in the latest reports."""
    utilization_percent: int = Field(default=0, ge=0, le=100)
    """Mean utilization of those GPUs over the latest reports."""
    gpu_seconds: int = Field(default=0, ge=0)
    """GPU-seconds held, over every admission."""
    used_gpu_seconds: int = Field(default=0, ge=0)
    """GPU-seconds weighted by utilization: what it actually used."""
    idle_since: datetime | None = None
    """Under its ClusterQueue's idle threshold since then (only with an idle policy)."""
    nodes: list[NodeGpuUse] = Field(
        default_factory=list,
        max_length=1024,
        json_schema_extra={"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"]},
    )


class WorkloadStatus(KubeModel):
    admission: Admission | None = None
    conditions: list[Condition] = conditions_field()
    requeue_state: RequeueState | None = None
    preemption: PreemptionNotice | None = None
    admission_checks: list[AdmissionCheckState] = Field(
        default_factory=list,
        max_length=MAX_CHECKS,
        json_schema_extra={"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"]},
    )
    """What each check of its ClusterQueue says: all Pending at reservation, then their own."""
    accumulated_past_execution_time_seconds: int | None = Field(default=None, ge=0)
    gpu_usage: GpuUsage | None = None


class Workload(Resource):
    """One job's request for quota; admitted whole or not at all."""

    model_config = ConfigDict(
        json_schema_extra=cel_rules(QUEUE_FIXED_WHILE_RESERVED, POD_SETS_FIXED_WHILE_RESERVED)
    )
    NAMESPACED = True

    kind: Literal["Workload"] = "Workload"
    spec: WorkloadSpec
    status: WorkloadStatus | None = None

    def has_condition(self, type_: str) -> bool:
        """Whether the condition of that type is True."""
        return self.status is not None and is_true(self.status.conditions, type_)

    @property
    def is_admitted(self) -> bool:
        return self.has_condition(names.COND_ADMITTED)

    @property
    def is_finished(self) -> bool:
        return self.has_condition(names.COND_FINISHED)

    @property
    def has_quota_reservation(self) -> bool:
        return self.has_condition(names.COND_QUOTA_RESERVED)
