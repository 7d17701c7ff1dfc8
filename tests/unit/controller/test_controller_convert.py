"""API objects become the core's inputs with exact canonical quantities."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from queuectl import convert
from queuectl.api import names
from queuectl.core import types as core


def container(**requests: str) -> dict[str, object]:
    return {"name": "c", "resources": {"requests": requests}}


@pytest.mark.parametrize(
    ("pod_spec", "expected"),
    [
        ({"containers": [container(cpu="1", memory="1Gi")]}, {"cpu": 1000, "memory": 2**30}),
        (
            {
                "containers": [
                    container(cpu="500m"),
                    container(cpu="250m", **{"nvidia.com/gpu": "2"}),
                ]
            },
            {"cpu": 750, "nvidia.com/gpu": 2},
        ),
        # an init container bigger than the sum wins; a smaller one changes nothing
        (
            {"containers": [container(cpu="1")], "initContainers": [container(cpu="3")]},
            {"cpu": 3000},
        ),
        (
            {"containers": [container(cpu="2")], "initContainers": [container(cpu="1")]},
            {"cpu": 2000},
        ),
        # a sidecar (restartPolicy Always) runs alongside and adds up
        (
            {
                "containers": [container(cpu="1")],
                "initContainers": [{**container(cpu="1"), "restartPolicy": "Always"}],
            },
            {"cpu": 2000},
        ),
        # limits stand in for missing requests; overhead is added
        (
            {
                "containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": 8}}}],
                "overhead": {"cpu": "100m"},
            },
            {"nvidia.com/gpu": 8, "cpu": 100},
        ),
        ({"containers": [{"name": "c"}]}, {}),
    ],
)
def test_pod_requests(pod_spec: dict[str, object], expected: dict[str, int]) -> None:
    assert convert.pod_requests(pod_spec) == expected


def test_cluster_queue_with_quota_limits_and_policies() -> None:
    cq = {
        "metadata": {"name": "team-a"},
        "spec": {
            "cohortName": "research",
            "queueingStrategy": "StrictFIFO",
            "stopPolicy": "Hold",
            "preemption": {
                "withinClusterQueue": "LowerPriority",
                "reclaimWithinCohort": "Any",
                "borrowWithinCohort": {"policy": "LowerPriority", "maxPriorityThreshold": 100},
            },
            "flavorFungibility": {"whenCanBorrow": "TryNextFlavor"},
            "resourceGroups": [
                {
                    "coveredResources": ["cpu", "nvidia.com/gpu"],
                    "flavors": [
                        {
                            "name": "h100",
                            "resources": [
                                {"name": "cpu", "nominalQuota": "64"},
                                {
                                    "name": "nvidia.com/gpu",
                                    "nominalQuota": 16,
                                    "borrowingLimit": "8",
                                    "lendingLimit": 4,
                                },
                            ],
                        }
                    ],
                }
            ],
        },
    }
    got = convert.cluster_queue(cq)
    assert got.cohort == "research"
    assert got.queueing_strategy == "StrictFIFO"
    assert got.stop_policy == "Hold"
    assert got.preemption == core.PreemptionPolicy(
        "LowerPriority", "Any", core.BorrowWithinCohort("LowerPriority", 100)
    )
    assert got.flavor_fungibility.when_can_borrow == "TryNextFlavor"
    (group,) = got.resource_groups
    assert group.covered_resources == ("cpu", "nvidia.com/gpu")
    assert group.flavors[0].resources == (
        core.ResourceQuota("cpu", 64000),
        core.ResourceQuota("nvidia.com/gpu", 16, borrowing_limit=8, lending_limit=4),
    )


def test_node_is_unschedulable_until_ready_and_reports_healthy_gpus() -> None:
    node = {
        "metadata": {
            "name": "gpu-1",
            "labels": {names.LABEL_TOPOLOGY_RACK: "r1", names.LABEL_GPU_HEALTHY_COUNT: "7"},
        },
        "spec": {"taints": [{"key": "gpu", "effect": "NoSchedule"}]},
        "status": {
            "allocatable": {"cpu": "96", "memory": "1Ti", "nvidia.com/gpu": "8"},
            "conditions": [{"type": "Ready", "status": "False"}],
        },
    }
    got = convert.node(node)
    assert got.allocatable == {"cpu": 96000, "memory": 2**40, "nvidia.com/gpu": 8}
    assert got.unschedulable
    assert got.healthy_gpus == 7
    assert got.taints == (core.Taint("gpu", "", "NoSchedule"),)
    node["status"]["conditions"][0]["status"] = "True"  # type: ignore[index]
    assert not convert.node(node).unschedulable


def admission() -> core.Admission:
    return core.Admission(
        "cq",
        (
            core.PodSetAssignment(
                "main",
                4,
                {"nvidia.com/gpu": "h100", "cpu": "h100"},
                {"nvidia.com/gpu": 32, "cpu": 4500},
                core.TopologyAssignment(
                    levels=(
                        names.LABEL_TOPOLOGY_BLOCK,
                        names.LABEL_TOPOLOGY_RACK,
                        names.LABEL_HOSTNAME,
                    ),
                    level=names.LABEL_TOPOLOGY_RACK,
                    domain=("b1", "r2"),
                    domains=(
                        core.DomainAssignment(("b1", "r2", "n1"), ("n1",), 3),
                        core.DomainAssignment(("b1", "r2", "n2"), ("n2",), 1),
                    ),
                ),
            ),
        ),
    )


def test_admission_round_trips_through_status() -> None:
    status = convert.admission_to_status(admission())
    assert status["podSetAssignments"][0]["resourceUsage"]["cpu"] == "4500m"
    assert convert.admission_from_status(status) == admission()


@settings(max_examples=50)
@given(
    st.dictionaries(
        st.sampled_from(["cpu", "memory", "nvidia.com/gpu", "pods"]),
        st.integers(min_value=0, max_value=10**15),
    )
)
def test_any_usage_round_trips(usage: dict[str, int]) -> None:
    adm = core.Admission("cq", (core.PodSetAssignment("main", 1, {}, usage),))
    assert convert.admission_from_status(convert.admission_to_status(adm)) == adm


def workload_obj(**status: object) -> dict[str, object]:
    return {
        "metadata": {"name": "w", "namespace": "ns", "creationTimestamp": "2025-01-01T00:00:00Z"},
        "spec": {
            "queueName": "lq",
            "priority": 100,
            "maximumExecutionTimeSeconds": 600,
            "podSets": [
                {
                    "name": "main",
                    "count": 4,
                    "template": {"spec": {"containers": [container(**{"nvidia.com/gpu": "8"})]}},
                    "topologyRequest": {"required": names.LABEL_TOPOLOGY_RACK},
                }
            ],
        },
        "status": status,
    }


def test_pending_workload() -> None:
    got = convert.workload(
        workload_obj(accumulatedPastExecutionTimeSeconds=100), "cq", grace_seconds=30
    )
    assert got.key == "ns/w"
    assert got.cluster_queue == "cq"
    assert got.priority == 100
    assert got.created == 1735689600.0
    assert got.admission is None
    assert got.max_execution_seconds == 500
    assert got.preemption_grace_seconds == 30
    (ps,) = got.podsets
    assert (ps.count, ps.requests) == (4, {"nvidia.com/gpu": 8})
    assert ps.topology == core.TopologyRequest(required=names.LABEL_TOPOLOGY_RACK)


def test_admitted_workload_brings_its_admission_back_after_a_restart() -> None:
    obj = workload_obj(
        admission=convert.admission_to_status(admission()),
        conditions=[
            {
                "type": "QuotaReserved",
                "status": "True",
                "lastTransitionTime": "2025-01-01T00:01:00Z",
            }
        ],
    )
    got = convert.workload(obj, "cq")
    assert got.admission == admission()
    assert got.admitted_at == 1735689660.0
    obj["status"]["conditions"].append({"type": "Finished", "status": "True"})  # type: ignore[index]
    assert convert.workload(obj, "cq").admission is None


def _podset(gpus: str, selector: dict[str, str] | None = None) -> dict[str, object]:
    spec: dict[str, object] = {
        "containers": [{"name": "c", "resources": {"requests": {names.GPU_RESOURCE: gpus}}}]
    }
    if selector:
        spec["nodeSelector"] = selector
    return {"name": "main", "count": 2, "template": {"spec": spec}}


def test_equal_podsets_are_one_object_and_unequal_ones_are_not() -> None:
    a, b = convert.podset(_podset("8")), convert.podset(_podset("8"))
    assert a is b
    assert convert.podset(_podset("4")) is not a
    other = convert.podset(_podset("8", {"zone": "a"}))
    assert other is not a
    assert other.node_selector == {"zone": "a"} and a.node_selector == {}
    assert a.requests == {names.GPU_RESOURCE: 8}
