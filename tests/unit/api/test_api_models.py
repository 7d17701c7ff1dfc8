"""Objects read from the API server validate, round-trip unchanged, and read as snake_case."""

from __future__ import annotations

import copy
from datetime import UTC, datetime
from typing import Any

import pytest

from queuectl.api import (
    KINDS,
    AdmissionCheck,
    ClusterQueue,
    ClusterQueueSpec,
    Cohort,
    ConditionStatus,
    FlavorQuotas,
    LabelSelector,
    LocalQueue,
    QueueingStrategy,
    Resource,
    ResourceFlavor,
    ResourceGroup,
    ResourceQuota,
    Topology,
    Workload,
    WorkloadPriorityClass,
    find_condition,
    names,
)

META = {
    "name": "team-a",
    "uid": "2f6f2b7e-0000-4000-8000-000000000001",
    "resourceVersion": "4711",
    "generation": 3,
    "creationTimestamp": "2026-01-02T03:04:05Z",
    "labels": {"team": "a"},
    "annotations": {"note": "x"},
    "managedFields": [{"manager": "kubectl", "operation": "Apply"}],
}
CONDITION = {
    "type": "Active",
    "status": "True",
    "reason": "Ready",
    "message": "Can admit new workloads",
    "lastTransitionTime": "2026-01-02T03:04:05Z",
    "observedGeneration": 3,
}

# As the API server returns them: defaults filled in, quantities as the user wrote them.
CLUSTER_QUEUE: dict[str, Any] = {
    "apiVersion": "queuectl.io/v1beta1",
    "kind": "ClusterQueue",
    "metadata": META,
    "spec": {
        "cohortName": "research",
        "namespaceSelector": {},
        "queueingStrategy": "StrictFIFO",
        "resourceGroups": [
            {
                "coveredResources": ["cpu", "memory", "nvidia.com/gpu"],
                "flavors": [
                    {
                        "name": "h100",
                        "resources": [
                            {"name": "cpu", "nominalQuota": "96"},
                            {"name": "memory", "nominalQuota": "1Ti"},
                            {
                                "name": "nvidia.com/gpu",
                                "nominalQuota": 16,
                                "borrowingLimit": 8,
                                "lendingLimit": "8",
                            },
                        ],
                    },
                    {
                        "name": "a100",
                        "resources": [
                            {"name": "cpu", "nominalQuota": "500m"},
                            {"name": "memory", "nominalQuota": "80Gi"},
                            {"name": "nvidia.com/gpu", "nominalQuota": 0},
                        ],
                    },
                ],
            }
        ],
        "preemption": {
            "withinClusterQueue": "LowerPriority",
            "reclaimWithinCohort": "Any",
            "borrowWithinCohort": {"policy": "LowerPriority", "maxPriorityThreshold": 100},
        },
        "flavorFungibility": {"whenCanBorrow": "MayStopSearch", "whenCanPreempt": "TryNextFlavor"},
        "fairSharing": {"weight": "3"},
        "stopPolicy": "None",
        "admissionChecks": ["capacity"],
    },
    "status": {
        "conditions": [CONDITION],
        "flavorsReservation": [
            {"name": "h100", "resources": [{"name": "nvidia.com/gpu", "total": 20, "borrowed": 4}]}
        ],
        "flavorsUsage": [
            {"name": "h100", "resources": [{"name": "nvidia.com/gpu", "total": 16, "borrowed": 0}]}
        ],
        "pendingWorkloads": 7,
        "reservingWorkloads": 3,
        "admittedWorkloads": 2,
        "fairSharing": {"weightedShare": 125},
    },
}
COHORT: dict[str, Any] = {
    "apiVersion": "queuectl.io/v1beta1",
    "kind": "Cohort",
    "metadata": {"name": "research"},
    "spec": {
        "parentName": "org",
        "resourceGroups": [
            {
                "coveredResources": ["nvidia.com/gpu"],
                "flavors": [
                    {
                        "name": "h100",
                        "resources": [
                            {"name": "nvidia.com/gpu", "nominalQuota": 8, "lendingLimit": 4}
                        ],
                    }
                ],
            }
        ],
        "fairSharing": {"weight": 1},
    },
    "status": {"conditions": [CONDITION], "fairSharing": {"weightedShare": 0}},
}
LOCAL_QUEUE: dict[str, Any] = {
    "apiVersion": "queuectl.io/v1beta1",
    "kind": "LocalQueue",
    "metadata": {**META, "namespace": "team-a", "name": "default"},
    "spec": {"clusterQueue": "team-a", "stopPolicy": "Hold"},
    "status": {
        "conditions": [CONDITION],
        "pendingWorkloads": 1,
        "reservingWorkloads": 0,
        "admittedWorkloads": 0,
        "flavorsReservation": [],
        "flavorsUsage": [{"name": "h100", "resources": [{"name": "cpu", "total": "2"}]}],
    },
}
FLAVOR: dict[str, Any] = {
    "apiVersion": "queuectl.io/v1beta1",
    "kind": "ResourceFlavor",
    "metadata": {"name": "h100"},
    "spec": {
        "nodeLabels": {names.LABEL_GPU_PRODUCT: "NVIDIA-H100-80GB-HBM3"},
        "nodeTaints": [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}],
        "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
        "topologyName": "gpu-fabric",
    },
}
TOPOLOGY: dict[str, Any] = {
    "apiVersion": "queuectl.io/v1beta1",
    "kind": "Topology",
    "metadata": {"name": "gpu-fabric"},
    "spec": {
        "levels": [
            {"nodeLabel": names.LABEL_TOPOLOGY_BLOCK},
            {"nodeLabel": names.LABEL_TOPOLOGY_RACK},
            {"nodeLabel": names.LABEL_HOSTNAME},
        ]
    },
}
PRIORITY_CLASS: dict[str, Any] = {
    "apiVersion": "queuectl.io/v1beta1",
    "kind": "WorkloadPriorityClass",
    "metadata": {"name": "exploration"},
    "value": 100,
    "description": "Cheap experiments; preempted first",
    "preemptionGracePeriodSeconds": 300,
    "minimumRuntimeSeconds": 60,
}
POD_TEMPLATE = {
    "metadata": {"annotations": {names.ANNOTATION_PODSET_REQUIRED_TOPOLOGY: "rack"}},
    "spec": {
        "restartPolicy": "Never",
        "containers": [
            {"name": "train", "image": "trainer:1", "resources": {"requests": {"cpu": "4"}}}
        ],
    },
}
WORKLOAD: dict[str, Any] = {
    "apiVersion": "queuectl.io/v1beta1",
    "kind": "Workload",
    "metadata": {
        "name": "job-train-1a2b3",
        "namespace": "team-a",
        "ownerReferences": [
            {
                "apiVersion": "batch/v1",
                "kind": "Job",
                "name": "train",
                "uid": "u-1",
                "controller": True,
                "blockOwnerDeletion": True,
            }
        ],
    },
    "spec": {
        "podSets": [
            {
                "name": "main",
                "count": 4,
                "template": POD_TEMPLATE,
                "topologyRequest": {"required": names.LABEL_TOPOLOGY_RACK},
            }
        ],
        "queueName": "default",
        "priorityClassName": "research",
        "priority": 1000,
        "active": True,
        "maximumExecutionTimeSeconds": 3600,
    },
    "status": {
        "admission": {
            "clusterQueue": "team-a",
            "podSetAssignments": [
                {
                    "name": "main",
                    "flavors": {"cpu": "h100", "nvidia.com/gpu": "h100"},
                    "resourceUsage": {"cpu": "16", "nvidia.com/gpu": 32},
                    "count": 4,
                    "topologyAssignment": {
                        "levels": [names.LABEL_TOPOLOGY_RACK, names.LABEL_HOSTNAME],
                        "domains": [
                            {"values": ["rack-1", "node-1"], "count": 2},
                            {"values": ["rack-1", "node-2"], "count": 2},
                        ],
                    },
                }
            ],
        },
        "conditions": [
            {**CONDITION, "type": "QuotaReserved", "reason": "QuotaReserved"},
            {**CONDITION, "type": "Admitted", "reason": "Admitted"},
        ],
        "requeueState": {"count": 1, "requeueAt": "2026-01-02T03:05:00Z"},
        "preemption": {
            "preemptor": "team-b/job-x",
            "deadline": "2026-01-02T03:09:05Z",
            "reason": "InCohortReclamation",
        },
        "admissionChecks": [
            {
                "name": "capacity",
                "state": "Ready",
                "message": "nodes provisioned",
                "lastTransitionTime": "2026-01-02T03:04:05Z",
            }
        ],
        "accumulatedPastExecutionTimeSeconds": 120,
    },
}
ADMISSION_CHECK: dict[str, Any] = {
    "apiVersion": "queuectl.io/v1beta1",
    "kind": "AdmissionCheck",
    "metadata": {"name": "capacity"},
    "spec": {
        "controllerName": "queuectl.io/provision",
        "parameters": {"apiGroup": "queuectl.io", "kind": "ProvisioningConfig", "name": "gpu"},
    },
    "status": {"conditions": [CONDITION]},
}

CASES: list[tuple[type[Resource], dict[str, Any]]] = [
    (ClusterQueue, CLUSTER_QUEUE),
    (Cohort, COHORT),
    (LocalQueue, LOCAL_QUEUE),
    (ResourceFlavor, FLAVOR),
    (Topology, TOPOLOGY),
    (WorkloadPriorityClass, PRIORITY_CLASS),
    (Workload, WORKLOAD),
    (AdmissionCheck, ADMISSION_CHECK),
]


def test_every_kind_has_a_round_trip_case() -> None:
    assert {model for model, _ in CASES} == set(KINDS)


@pytest.mark.parametrize(("model", "obj"), CASES, ids=lambda c: getattr(c, "__name__", ""))
def test_api_objects_round_trip_unchanged(model: type[Resource], obj: dict[str, Any]) -> None:
    original = copy.deepcopy(obj)
    parsed = model.model_validate(obj)
    assert parsed.to_api() == original
    again = model.model_validate(parsed.model_dump(by_alias=True, exclude_none=True))
    assert again == parsed
    assert obj == original  # validation never mutates its input


def test_fields_read_in_snake_case_with_types() -> None:
    cq = ClusterQueue.model_validate(CLUSTER_QUEUE)
    assert cq.metadata.name == "team-a"
    assert cq.metadata.creation_timestamp == datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
    assert cq.spec.queueing_strategy is QueueingStrategy.STRICT_FIFO
    gpu = cq.spec.resource_groups[0].flavors[0].resources[2]
    assert gpu.canonical_limits() == (16, 8, 8)
    active = find_condition(cq.status.conditions if cq.status else [], names.COND_ACTIVE)
    assert active is not None and active.status is ConditionStatus.TRUE

    wl = Workload.model_validate(WORKLOAD)
    assert wl.is_admitted and wl.has_quota_reservation and not wl.is_finished
    assert wl.metadata.owner_references and wl.metadata.owner_references[0].kind == "Job"


def test_python_construction_uses_snake_case_and_fills_defaults() -> None:
    cq = ClusterQueue.named(
        "team-b",
        spec=ClusterQueueSpec(
            namespace_selector=LabelSelector(),
            resource_groups=[
                ResourceGroup(
                    covered_resources=["nvidia.com/gpu"],
                    flavors=[
                        FlavorQuotas(
                            name="h100",
                            resources=[ResourceQuota(name="nvidia.com/gpu", nominal_quota=8)],
                        )
                    ],
                )
            ],
        ),
    )
    out = cq.to_api()
    assert out["kind"] == "ClusterQueue" and out["apiVersion"] == names.API_VERSION
    assert out["spec"]["namespaceSelector"] == {}  # {} = all namespaces, kept distinct from unset
    assert out["spec"]["queueingStrategy"] == "BestEffortFIFO"
    assert out["spec"]["preemption"] == {
        "withinClusterQueue": "Never",
        "reclaimWithinCohort": "Never",
    }
    assert out["spec"]["flavorFungibility"] == {
        "whenCanBorrow": "MayStopSearch",
        "whenCanPreempt": "TryNextFlavor",
    }
    assert "cohortName" not in out["spec"]


def test_priority_class_fields_are_top_level_with_default_grace() -> None:
    wpc = WorkloadPriorityClass.model_validate(
        {
            "apiVersion": "queuectl.io/v1beta1",
            "kind": "WorkloadPriorityClass",
            "metadata": {"name": "p"},
            "value": 5,
        }
    )
    assert wpc.preemption_grace_period_seconds == 0
    assert wpc.to_api()["preemptionGracePeriodSeconds"] == 0
    assert "spec" not in wpc.to_api()


def test_unknown_fields_are_ignored_so_newer_crds_do_not_break_readers() -> None:
    obj = copy.deepcopy(LOCAL_QUEUE)
    obj["spec"]["fairSharing"] = {"weight": 2}
    assert LocalQueue.model_validate(obj).spec.cluster_queue == "team-a"


def test_conditions_are_timezone_aware_and_serialize_as_rfc3339() -> None:
    wl = Workload.model_validate(WORKLOAD)
    assert wl.status is not None
    assert wl.status.conditions[0].last_transition_time.tzinfo is not None
    assert wl.to_api()["status"]["conditions"][0]["lastTransitionTime"] == "2026-01-02T03:04:05Z"
