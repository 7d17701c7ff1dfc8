"""Node patch scenarios: the agent writes only what changed, and never disturbs what others own."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from queuectl.agent import health, nodestate
from queuectl.agent.discovery import read_inventory
from queuectl.agent.health import GpuState, HealthState
from queuectl.agent.nodestate import NodeView, desired_node, diff
from queuectl.agent.scripted import ManualClock, ScriptedReader
from queuectl.api import names

NOW = 1_700_000_000.0
INV = read_inventory(ScriptedReader.node("H100", 8, "nvswitch", clock=ManualClock()))
HEALTHY: HealthState = {g.uuid: GpuState(g.index, g.uuid) for g in INV.gpus}
KUBELET_READY = {"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "ok"}
CORDON = {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}


def sick(state: HealthState, index: int, reason: str = names.REASON_GPU_XID) -> dict[str, GpuState]:
    out = dict(state)
    uuid = INV.gpus[index].uuid
    out[uuid] = GpuState(
        index, uuid, healthy=False, reason=reason, message="XID 79", since=NOW, last_fault_at=NOW
    )
    return out


def want(state: HealthState, **kw: bool) -> nodestate.DesiredNode:
    return desired_node(INV, health.summarize(state), health.encode(state), **kw)


def fresh_node() -> NodeView:
    return NodeView(
        labels={"kubernetes.io/hostname": "gpu-0"},
        taints=[CORDON],
        conditions=[KUBELET_READY],
        resource_version="41",
    )


def test_a_fresh_node_gets_labels_matrix_and_a_true_condition_but_no_taint() -> None:
    patch = diff(fresh_node(), want(HEALTHY), NOW)
    assert patch.node is not None and patch.status is not None
    labels = patch.node["metadata"]["labels"]
    assert labels[names.LABEL_GPU_PRODUCT] == "NVIDIA-H100-80GB-HBM3"
    assert labels[names.LABEL_GPU_NVLINK] == names.NVLINK_CLASS_NVSWITCH
    assert labels[names.LABEL_GPU_HEALTHY_COUNT] == "8"
    assert names.LABEL_GPU_CLIQUE not in labels  # absent and not wanted: nothing to remove
    matrix = json.loads(patch.node["metadata"]["annotations"][names.ANNOTATION_GPU_TOPOLOGY_MATRIX])
    assert matrix["matrix"][0][1] == "NV18"
    assert "spec" not in patch.node and "resourceVersion" not in patch.node["metadata"]
    (cond,) = patch.status["status"]["conditions"]
    assert (cond["type"], cond["status"], cond["reason"]) == (
        "GPUHealthy",
        "True",
        "AllGPUsHealthy",
    )
    assert cond["lastTransitionTime"] == cond["lastHeartbeatTime"] == "2023-11-14T22:13:20Z"


def test_a_node_that_already_matches_needs_no_patch() -> None:
    node = nodestate.apply(fresh_node(), diff(fresh_node(), want(HEALTHY), NOW))
    assert diff(node, want(HEALTHY), NOW + 60).empty


def test_an_unhealthy_gpu_adds_the_taint_lowers_the_count_and_keeps_other_taints() -> None:
    node = nodestate.apply(fresh_node(), diff(fresh_node(), want(HEALTHY), NOW))
    patch = diff(node, want(sick(HEALTHY, 3)), NOW + 10)
    assert patch.node is not None and patch.status is not None
    assert patch.node["metadata"]["labels"] == {names.LABEL_GPU_HEALTHY_COUNT: "7"}
    assert patch.node["metadata"]["resourceVersion"] == "41"  # the taint list is replaced whole
    assert patch.node["spec"]["taints"] == [
        CORDON,
        {"key": names.TAINT_GPU_UNHEALTHY, "value": "CriticalXid", "effect": "NoSchedule"},
    ]
    assert names.ANNOTATION_GPU_HEALTH in patch.node["metadata"]["annotations"]
    (cond,) = patch.status["status"]["conditions"]
    assert (cond["status"], cond["reason"]) == ("False", "CriticalXid")
    assert cond["lastTransitionTime"] == "2023-11-14T22:13:30Z"


def test_recovery_removes_only_our_taint_and_the_health_annotation() -> None:
    node = fresh_node()
    for state, t in ((HEALTHY, NOW), (sick(HEALTHY, 3), NOW + 10)):
        node = nodestate.apply(node, diff(node, want(state), t))
    patch = diff(node, want(HEALTHY), NOW + 400)
    assert patch.node is not None
    assert patch.node["spec"]["taints"] == [CORDON]
    assert patch.node["metadata"]["annotations"] == {names.ANNOTATION_GPU_HEALTH: None}
    assert patch.node["metadata"]["labels"] == {names.LABEL_GPU_HEALTHY_COUNT: "8"}
    assert any("remove taint" in c for c in patch.changes)


def test_a_changed_reason_rewrites_the_taint_value() -> None:
    node = nodestate.apply(fresh_node(), diff(fresh_node(), want(sick(HEALTHY, 1)), NOW))
    patch = diff(node, want(sick(HEALTHY, 1, names.REASON_GPU_OVERHEATED)), NOW + 10)
    assert patch.node is not None
    taints = patch.node["spec"]["taints"]
    assert [t["value"] for t in taints if t["key"] == names.TAINT_GPU_UNHEALTHY] == ["Overheated"]


def test_the_heartbeat_is_refreshed_only_when_stale_and_keeps_the_transition_time() -> None:
    node = nodestate.apply(fresh_node(), diff(fresh_node(), want(HEALTHY), NOW))
    assert diff(node, want(HEALTHY), NOW + 299, heartbeat_s=300).empty
    patch = diff(node, want(HEALTHY), NOW + 300, heartbeat_s=300)
    assert patch.node is None and patch.status is not None
    (cond,) = patch.status["status"]["conditions"]
    assert cond["lastTransitionTime"] == "2023-11-14T22:13:20Z"
    assert cond["lastHeartbeatTime"] == "2023-11-14T22:18:20Z"


def test_without_gfd_labels_the_agent_leaves_nvidia_labels_to_gfd() -> None:
    node = NodeView(labels={names.LABEL_GPU_PRODUCT: "set-by-gfd"})
    patch = diff(node, want(HEALTHY, gfd_labels=False), NOW)
    assert patch.node is not None
    assert set(patch.node["metadata"]["labels"]) == {
        names.LABEL_GPU_NVLINK,
        names.LABEL_GPU_HEALTHY_COUNT,
    }


def test_an_owned_label_no_longer_discovered_is_removed() -> None:
    node = NodeView(labels={names.LABEL_GPU_CLIQUE: "old.1"})
    patch = diff(node, want(HEALTHY), NOW)
    assert patch.node is not None
    assert patch.node["metadata"]["labels"][names.LABEL_GPU_CLIQUE] is None


def test_nvml_unavailable_touches_only_the_condition() -> None:
    node = NodeView(
        labels={names.LABEL_GPU_HEALTHY_COUNT: "8"},
        taints=[{"key": names.TAINT_GPU_UNHEALTHY, "value": "CriticalXid", "effect": "NoSchedule"}],
    )
    patch = diff(node, nodestate.desired_unavailable("NVML Shared Library Not Found"), NOW)
    assert patch.node is None and patch.status is not None
    (cond,) = patch.status["status"]["conditions"]
    assert (cond["status"], cond["reason"]) == ("Unknown", "NVMLUnavailable")
    assert cond["message"] == "NVML Shared Library Not Found"


def test_a_node_as_the_api_server_returns_it_is_read() -> None:
    raw = {
        "metadata": {"name": "n", "resourceVersion": "7", "labels": {"a": "b"}},
        "spec": {"taints": [CORDON]},
        "status": {"conditions": [KUBELET_READY]},
    }
    view = NodeView.from_dict(raw)
    assert (view.labels, view.resource_version, view.condition("Ready")) == (
        {"a": "b"},
        "7",
        KUBELET_READY,
    )
    assert NodeView.from_dict({"metadata": {}}).taints == []


@settings(max_examples=40, deadline=None)
@given(st.lists(st.sets(st.integers(0, 7)), min_size=1, max_size=6))
def test_diff_then_apply_always_converges(sick_sets: list[set[int]]) -> None:
    node = fresh_node()
    for i, bad in enumerate(sick_sets):
        state: HealthState = dict(HEALTHY)
        for index in bad:
            state = sick(state, index)
        desired = want(state)
        node = nodestate.apply(node, diff(node, desired, NOW + i))
        assert diff(node, desired, NOW + i).empty
        assert node.labels[names.LABEL_GPU_HEALTHY_COUNT] == str(8 - len(bad))
        ours = [t for t in node.taints if t["key"] == names.TAINT_GPU_UNHEALTHY]
        assert len(ours) == (1 if bad else 0)
        assert CORDON in node.taints
