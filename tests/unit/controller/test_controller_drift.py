"""`jobs.drift`: when a Workload no longer describes its job (only what quota is sized for)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from queuectl.api import names
from queuectl.controller.workloads.drift import drift, follow_patch

GPU = names.GPU_RESOURCE


def pod_set(
    count: int = 1, gpus: Any = "2", cpu: Any = "1", name: str = "main", **extra: Any
) -> dict[str, Any]:
    container = {"name": "c", "resources": {"requests": {GPU: gpus, "cpu": cpu}}}
    return {
        "name": name,
        "count": count,
        "template": {"spec": {"containers": [container]}},
        **extra,
    }


def spec(*pod_sets: dict[str, Any], queue: str = "lq") -> dict[str, Any]:
    return {"podSets": list(pod_sets) or [pod_set()], "queueName": queue}


WORKLOAD = {"metadata": {"name": "wl", "namespace": "ns", "resourceVersion": "7"}, "spec": spec()}


def with_affinity(ps: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(ps)
    out["template"]["spec"]["affinity"] = {"nodeAffinity": {"x": "injected by placement"}}
    out["template"]["spec"]["tolerations"] = [{"key": "gpu", "operator": "Exists"}]
    return out


@pytest.mark.parametrize(
    ("scenario", "wanted"),
    [
        ("the same job", spec()),
        ("the same quantity spelled otherwise", spec(pod_set(gpus=2, cpu="1000m"))),
        ("queue label removed (refused by the webhook)", spec(queue="")),
    ],
)
def test_what_does_not_count_as_a_change(scenario: str, wanted: dict[str, Any]) -> None:
    assert drift(wanted, WORKLOAD) == [], scenario


def test_the_placement_the_controller_injected_is_no_change() -> None:
    placed = [with_affinity(pod_set())]
    assert drift(spec(*placed), WORKLOAD, placed) == []


@pytest.mark.parametrize(
    ("scenario", "wanted", "said"),
    [
        (
            "scaled from 1 to 8 pods",
            spec(pod_set(8)),
            "pod sets [main: 1 x {cpu=1000, nvidia.com/gpu=2}] -> "
            "[main: 8 x {cpu=1000, nvidia.com/gpu=2}]",
        ),
        ("more GPUs a pod", spec(pod_set(gpus="4")), "nvidia.com/gpu=4"),
        (
            "a topology request",
            spec(pod_set(topologyRequest={"required": "rack"})),
            "topology rack",
        ),
        ("another pod set", spec(pod_set(), pod_set(name="workers")), "workers: 1 x"),
        ("another queue", spec(queue="lq2"), "queue 'lq' -> 'lq2'"),
    ],
)
def test_what_counts_as_a_change(scenario: str, wanted: dict[str, Any], said: str) -> None:
    (change,) = drift(wanted, WORKLOAD)
    assert said in change, scenario


def test_the_follow_patch_is_conditional_and_moves_the_queue_label() -> None:
    wanted = spec(pod_set(8), queue="lq2")
    assert follow_patch(WORKLOAD, wanted) == {
        "metadata": {"resourceVersion": "7", "labels": {names.LABEL_QUEUE_NAME: "lq2"}},
        "spec": {"podSets": wanted["podSets"], "queueName": "lq2"},
    }


H100_TERMS = {
    "nodeSelectorTerms": [
        {"matchExpressions": [{"key": "gpu", "operator": "In", "values": ["h100"]}]}
    ]
}
A100_TERMS = {
    "nodeSelectorTerms": [
        {"matchExpressions": [{"key": "gpu", "operator": "In", "values": ["a100"]}]}
    ]
}


def placed_on(terms: dict[str, Any], **pod: Any) -> dict[str, Any]:
    out = pod_set()
    out["template"]["spec"]["affinity"] = {
        "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": terms}
    }
    out["template"]["spec"].update(pod)
    return out


@pytest.mark.parametrize(
    ("scenario", "now", "said"),
    [
        (
            "node affinity swapped for the H100 nodes",
            placed_on(H100_TERMS),
            "affinity.nodeAffinity",
        ),
        (
            "a nodeSelector added beside the injection",
            placed_on(A100_TERMS, nodeSelector={"gpu": "h100"}),
            "nodeSelector",
        ),
        (
            "a toleration of another flavor's taint",
            placed_on(A100_TERMS, tolerations=[{"key": "h100", "operator": "Exists"}]),
            "tolerations",
        ),
        ("pinned to a node", placed_on(A100_TERMS, nodeName="h100-7"), "nodeName"),
    ],
)
def test_a_job_moved_off_its_admitted_placement_drifts(
    scenario: str, now: dict[str, Any], said: str
) -> None:
    """Holding quota on the A100 flavor (its affinity injected): any other placement slipped
    past the webhook (down, or its cache behind) and is a change, though the shape is not."""
    placed = [placed_on(A100_TERMS)]
    assert drift(spec(*placed), WORKLOAD, placed) == []
    (change,) = drift(spec(now), WORKLOAD, placed)
    assert change == f"pod set 'main': {said} not as admitted", scenario


def test_a_waiting_workload_follows_its_jobs_placement() -> None:
    moved = spec(pod_set())
    moved["podSets"][0]["template"]["spec"]["nodeSelector"] = {"gpu": "h100"}
    (change,) = drift(moved, WORKLOAD)
    assert "nodeSelector" in change
    assert follow_patch(WORKLOAD, moved)["spec"]["podSets"] == moved["podSets"]
