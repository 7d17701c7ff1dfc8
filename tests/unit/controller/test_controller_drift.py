"""`jobs.drift`: when a Workload no longer describes its job (only what quota is sized for)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from queuectl.api import names
from queuectl.controller.drift import drift, follow_patch

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
        ("placement injected into the template", spec(with_affinity(pod_set()))),
        ("queue label removed (refused by the webhook)", spec(queue="")),
    ],
)
def test_what_does_not_count_as_a_change(scenario: str, wanted: dict[str, Any]) -> None:
    assert drift(wanted, WORKLOAD) == [], scenario


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
