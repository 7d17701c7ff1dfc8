"""What a CRD says beyond its schema: names, short names, scope and printer columns."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Final

from queuectl.api import (
    AdmissionCheck,
    ClusterQueue,
    Cohort,
    LocalQueue,
    Resource,
    ResourceFlavor,
    Topology,
    Workload,
    WorkloadPriorityClass,
    names,
)

CATEGORIES: Final = ("queuectl",)


def _cond(type_: str) -> str:
    return f'.status.conditions[?(@.type=="{type_}")].status'


@dataclass(frozen=True)
class Column:
    """An additionalPrinterColumn; priority 1 shows only with ``kubectl get -o wide``."""

    name: str
    json_path: str
    type: str = "string"
    description: str = ""
    priority: int = 0


AGE: Final = Column("Age", ".metadata.creationTimestamp", "date")


@dataclass(frozen=True)
class KindInfo:
    model: type[Resource]
    plural: str
    short_names: tuple[str, ...]
    columns: tuple[Column, ...] = field(default=(AGE,))

    @property
    def kind(self) -> str:
        return str(self.model.model_fields["kind"].default)

    @property
    def crd_name(self) -> str:
        return f"{self.plural}.{names.GROUP}"

    @property
    def has_status(self) -> bool:
        return "status" in self.model.model_fields


KIND_INFOS: Final[tuple[KindInfo, ...]] = (
    KindInfo(
        ResourceFlavor,
        "resourceflavors",
        ("rf", "flavor", "flavors"),
        (
            Column("Topology", ".spec.topologyName", description="Topology of the flavor's nodes"),
            AGE,
        ),
    ),
    KindInfo(Topology, "topologies", ("topo",)),
    KindInfo(
        Cohort,
        "cohorts",
        ("co",),
        (Column("Parent", ".spec.parentName", description="Parent cohort"), AGE),
    ),
    KindInfo(
        ClusterQueue,
        "clusterqueues",
        ("cq",),
        (
            Column("Cohort", ".spec.cohortName", description="Cohort it borrows from"),
            Column("Strategy", ".spec.queueingStrategy", description="Queueing strategy"),
            Column("Pending", ".status.pendingWorkloads", "integer", "Pending workloads"),
            Column(
                "Reserving", ".status.reservingWorkloads", "integer", "Workloads holding quota", 1
            ),
            Column("Admitted", ".status.admittedWorkloads", "integer", "Admitted workloads"),
            Column("Active", _cond(names.COND_ACTIVE), description="Whether it admits work"),
            Column(
                "Bank",
                ".status.gpuTimeBank.balanceGPUHours",
                "number",
                "GPU time credit in GPU-hours (spec.gpuTimeBank)",
            ),
            Column("Stop", ".spec.stopPolicy", description="Stop policy", priority=1),
            AGE,
        ),
    ),
    KindInfo(
        LocalQueue,
        "localqueues",
        ("lq", "queue", "queues"),
        (
            Column("ClusterQueue", ".spec.clusterQueue", description="Where its work goes"),
            Column("Pending", ".status.pendingWorkloads", "integer", "Pending workloads"),
            Column("Admitted", ".status.admittedWorkloads", "integer", "Admitted workloads"),
            Column(
                "Active", _cond(names.COND_ACTIVE), description="Whether it admits work", priority=1
            ),
            Column(
                "GPUs",
                ".status.clusterQueueQuota.gpus",
                description="Its ClusterQueue's GPUs: used of nominal, borrowable now, pending",
                priority=1,
            ),
            AGE,
        ),
    ),
    KindInfo(
        WorkloadPriorityClass,
        "workloadpriorityclasses",
        ("wpc",),
        (
            Column("Value", ".value", "integer", "Priority: higher first"),
            Column(
                "Grace",
                ".preemptionGracePeriodSeconds",
                "integer",
                "Seconds of notice before a preempted Job is suspended",
            ),
            Column(
                "MinRuntime",
                ".minimumRuntimeSeconds",
                "integer",
                "Seconds during which it is not preempted",
            ),
            Column("Description", ".description", priority=1),
            AGE,
        ),
    ),
    KindInfo(
        AdmissionCheck,
        "admissionchecks",
        ("ac",),
        (
            Column("Controller", ".spec.controllerName", description="Who decides the check"),
            Column("Active", _cond(names.COND_ACTIVE), description="Set by its controller"),
            AGE,
        ),
    ),
    KindInfo(
        Workload,
        "workloads",
        ("wl",),
        (
            Column("Queue", ".spec.queueName", description="LocalQueue"),
            Column(
                "Reserved in",
                ".status.admission.clusterQueue",
                description="ClusterQueue holding its quota",
            ),
            Column("Admitted", _cond(names.COND_ADMITTED), description="Admitted"),
            Column(
                "Checks",
                ".status.admissionChecks[*].state",
                description="States of its admission checks",
                priority=1,
            ),
            Column("Finished", _cond(names.COND_FINISHED), description="Finished"),
            Column("Priority", ".spec.priority", "integer", "Priority", 1),
            AGE,
        ),
    ),
)
