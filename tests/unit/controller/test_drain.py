"""Auto-drain's pure decisions: what counts as a bad node, the per-flavor budget, which
workloads sit on a node, and how the core sees a node and a workload requeued for node failures."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from queuectl import convert
from queuectl.api import names
from queuectl.api.resource import Resource
from queuectl.controller.nodes import drain
from queuectl.controller.watch import kube as k
from queuectl.controller.watch import podowners


def node(
    name: str,
    *,
    labels: dict[str, str] | None = None,
    taints: list[dict[str, str]] | None = None,
    gpu_condition: tuple[str, str] | None = None,
    unschedulable: bool = False,
    gpus: int = 8,
    healthy: int | None = None,
) -> dict[str, Any]:
    lbl = dict(labels or {})
    if healthy is not None:
        lbl[names.LABEL_GPU_HEALTHY_COUNT] = str(healthy)
    conditions = [{"type": "Ready", "status": "True"}]
    if gpu_condition:
        conditions.append(
            {
                "type": names.NODE_CONDITION_GPU_HEALTHY,
                "status": gpu_condition[0],
                "reason": gpu_condition[1],
            }
        )
    return {
        "metadata": {"name": name, "labels": lbl, "resourceVersion": "1"},
        "spec": {"taints": taints or [], "unschedulable": unschedulable},
        "status": {"allocatable": {names.GPU_RESOURCE: str(gpus)}, "conditions": conditions},
    }


def bad(value: str = "CriticalXid", effect: str = "NoSchedule") -> dict[str, str]:
    return {"key": names.TAINT_GPU_UNHEALTHY, "value": value, "effect": effect}


@pytest.mark.parametrize(
    ("obj", "reason"),
    [
        (node("n"), None),
        (node("n", taints=[bad()]), "CriticalXid"),
        (node("n", taints=[bad("DoubleBitEccError", "NoExecute")]), "DoubleBitEccError"),
        (node("n", taints=[bad(effect="PreferNoSchedule")]), None),
        (node("n", taints=[{"key": "other", "effect": "NoSchedule"}]), None),
        (node("n", gpu_condition=("False", "Overheated")), "Overheated"),
        (node("n", gpu_condition=("True", "AllGPUsHealthy")), None),
        (node("n", gpu_condition=("Unknown", "NVMLUnavailable")), None),
    ],
    ids=[
        "healthy",
        "xid-taint",
        "noexecute-taint",
        "soft-taint-ignored",
        "foreign-taint",
        "condition-false",
        "condition-true",
        "nvml-unavailable-is-not-a-fault",
    ],
)
def test_what_makes_a_node_unhealthy(obj: dict[str, Any], reason: str | None) -> None:
    assert drain.unhealthy_reason(obj) == reason


@pytest.mark.parametrize(
    ("members", "share", "limit"),
    [(1, 0.25, 1), (3, 0.25, 1), (4, 0.25, 1), (8, 0.25, 2), (10, 0.25, 2), (4, 0.5, 2), (4, 1, 4)],
)
def test_budget_is_a_share_of_the_flavor_but_at_least_one_node(
    members: int, share: float, limit: int
) -> None:
    assert drain.budget_limit(members, share) == limit


def test_a_node_in_two_flavors_must_fit_both_budgets() -> None:
    members = {"big": {f"b{i}" for i in range(8)} | {"x"}, "small": {"s1", "s2", "x"}}
    assert drain.over_budget("x", members, {"b0"}, 0.25) is None
    why = drain.over_budget("x", members, {"s1"}, 0.25)
    assert why is not None and "flavor small" in why and "1 of its 3" in why
    assert drain.over_budget("lonely", members, {"s1", "b0"}, 0.25) is None  # in no flavor


@settings(max_examples=60, deadline=None)
@given(
    flavors=st.lists(st.sets(st.integers(0, 11), min_size=1, max_size=12), min_size=1, max_size=3),
    order=st.permutations(list(range(12))),
    share=st.sampled_from([0.1, 0.25, 0.5, 1.0]),
)
def test_draining_one_by_one_never_exceeds_any_flavor_budget(
    flavors: list[set[int]], order: list[int], share: float
) -> None:
    members = {f"f{i}": {f"n{x}" for x in nodes} for i, nodes in enumerate(flavors)}
    drained: set[str] = set()
    for x in order:
        if drain.over_budget(f"n{x}", members, drained, share) is None:
            drained.add(f"n{x}")
    for nodes in members.values():
        assert len(nodes & drained) <= drain.budget_limit(len(nodes), share)


def test_flavor_members_match_every_node_label() -> None:
    flavors: list[dict[str, Any]] = [
        {"metadata": {"name": "h100"}, "spec": {"nodeLabels": {"gpu": "h100", "pool": "a"}}},
        {"metadata": {"name": "any"}, "spec": {}},
    ]
    nodes = [
        node("a1", labels={"gpu": "h100", "pool": "a"}),
        node("b1", labels={"gpu": "h100", "pool": "b"}),
    ]
    assert drain.flavor_members(flavors, nodes) == {"h100": {"a1"}, "any": {"a1", "b1"}}


def test_assigned_nodes_come_from_the_hostname_level_of_topology_assignments() -> None:
    wl = {
        "status": {
            "admission": {
                "podSetAssignments": [
                    {
                        "topologyAssignment": {
                            "levels": [names.LABEL_TOPOLOGY_BLOCK, names.LABEL_HOSTNAME],
                            "domains": [
                                {"values": ["b1", "n1"], "count": 1},
                                {"values": ["b1", "n2"], "count": 1},
                            ],
                        }
                    },
                    {
                        "topologyAssignment": {
                            "levels": [names.LABEL_TOPOLOGY_BLOCK],
                            "domains": [{"values": ["b2"], "count": 2}],
                        }
                    },
                    {"name": "no-topology"},
                ]
            }
        }
    }
    assert drain.assigned_nodes(wl) == {"n1", "n2"}


JOB = {"metadata": {"name": "train", "uid": "u1", "labels": {names.LABEL_WORKLOAD: "job-train"}}}


def pod(phase: str = "Running", uid: str = "u1", kind: str = "Job") -> dict[str, Any]:
    return {
        "metadata": {
            "name": "train-abc",
            "namespace": "ns",
            "ownerReferences": [{"kind": kind, "name": "train", "uid": uid, "controller": True}],
        },
        "status": {"phase": phase},
    }


@pytest.mark.parametrize(
    ("obj", "key"),
    [
        (pod(), "ns/job-train"),
        (pod("Pending"), "ns/job-train"),
        (pod("Succeeded"), None),
        (pod("Failed"), None),
        (pod(uid="older-job"), None),
        (pod(kind="ReplicaSet"), None),
    ],
    ids=["running", "pending", "succeeded", "failed", "other-job-same-name", "not-a-job"],
)
def test_a_pod_leads_to_its_workload_through_its_job(obj: dict[str, Any], key: str | None) -> None:
    def get(res: Resource, name: str, ns: str) -> dict[str, Any] | None:
        return JOB if (res, ns, name) == (k.JOBS, "ns", "train") else None

    assert podowners.pod_workload(obj, podowners.Owners(get, [k.JOBS])) == key


def test_a_jobset_pod_leads_to_its_workload_by_its_own_label() -> None:
    """A JobSet's pods belong to child Jobs with no queuectl label; the kind labels the pods."""
    obj = pod(uid="child-job-of-a-jobset")
    obj["metadata"]["labels"] = {names.LABEL_WORKLOAD: "jobset-train-1"}
    owners = podowners.Owners(lambda res, ns, name: None, [k.JOBS])
    assert podowners.pod_workload(obj, owners) == "ns/jobset-train-1"


@pytest.mark.parametrize(
    ("obj", "unschedulable", "gpus"),
    [
        (node("n", healthy=8), False, 8),
        (node("n", healthy=7, taints=[bad()]), True, 7),
        (node("n", taints=[bad(effect="PreferNoSchedule")]), False, 8),
        (node("n", unschedulable=True), True, 8),
    ],
    ids=["healthy", "unhealthy-taint-offers-nothing", "soft-taint", "cordoned"],
)
def test_core_node_counts_healthy_gpus_and_offers_nothing_when_tainted(
    obj: dict[str, Any], unschedulable: bool, gpus: int
) -> None:
    from queuectl.core.topology import node_capacity

    core_node = convert.node(obj)
    assert core_node.unschedulable is unschedulable
    assert node_capacity(core_node)[names.GPU_RESOURCE] == gpus


def workload(conditions: list[dict[str, str]]) -> dict[str, Any]:
    return {
        "metadata": {"name": "w", "namespace": "ns", "creationTimestamp": "2025-01-01T00:00:00Z"},
        "spec": {"queueName": "lq", "podSets": [{"name": "main", "count": 1}]},
        "status": {"conditions": conditions},
    }


@pytest.mark.parametrize(
    ("reason", "status", "front"),
    [
        (names.REASON_EVICTED_NODE_FAILURES, "True", True),
        (names.REASON_EVICTED_NODE_FAILURES, "False", False),
        (names.REASON_EVICTED_PREEMPTION, "True", False),
    ],
)
def test_a_workload_requeued_for_node_failures_goes_ahead_of_its_peers(
    reason: str, status: str, front: bool
) -> None:
    wl = workload([{"type": names.COND_REQUEUED, "status": status, "reason": reason}])
    assert convert.workload(wl, "cq").front is front


@pytest.mark.parametrize(
    ("argv", "enabled", "share"),
    [
        ([], True, 0.25),
        (["--no-auto-drain"], False, 0.25),
        (["--auto-drain", "--drain-max-share=0.5"], True, 0.5),
    ],
)
def test_controller_flags_switch_auto_drain(argv: list[str], enabled: bool, share: float) -> None:
    from queuectl.cli.main import build_parser

    parser, _ = build_parser()
    args = parser.parse_args(["controller", *argv])
    assert (args.auto_drain, args.drain_max_share) == (enabled, share)


@pytest.mark.parametrize("share", ["0", "1.5", "-0.1"])
def test_a_drain_share_outside_zero_to_one_is_refused(share: str) -> None:
    from queuectl.cli.main import build_parser

    parser, _ = build_parser()
    with pytest.raises(SystemExit):
        parser.parse_args(["controller", f"--drain-max-share={share}"])
