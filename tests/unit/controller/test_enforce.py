"""What runs is the truth: an admitted Workload's running pods against its admission. A Job
admitted for 2 pods of 4 A100 GPUs each on the a100 flavor; whatever a user did to get more
running (a pod claiming the Job, a node elsewhere, bigger requests), the comparison names it."""

from __future__ import annotations

from typing import Any

import pytest

from queuectl.api import names
from queuectl.controller.enforcement.enforce import (
    FLAVOR,
    GPUS,
    POD_SET,
    PODS,
    Excess,
    describe,
    excess,
)

GPU = names.GPU_RESOURCE
MIG = "nvidia.com/mig-3g.40gb"
FLAVORS: dict[str, dict[str, Any]] = {
    "a100": {"metadata": {"name": "a100"}, "spec": {"nodeLabels": {"gpu": "a100"}}},
    "h100": {"metadata": {"name": "h100"}, "spec": {"nodeLabels": {"gpu": "h100"}}},
    "mig": {
        "metadata": {"name": "mig"},
        "spec": {"nodeLabels": {"gpu": "a100-mig"}, "gpuResource": MIG},
    },
    "cpu": {"metadata": {"name": "cpu"}, "spec": {"nodeLabels": {"pool": "cpu"}}},
    "any": {"metadata": {"name": "any"}, "spec": {}},
}
NODES = {
    n: {"metadata": {"name": n, "labels": labels}}
    for n, labels in {
        "a100-0": {"gpu": "a100"},
        "a100-1": {"gpu": "a100"},
        "h100-0": {"gpu": "h100"},
        "mig-0": {"gpu": "a100-mig"},
        "cpu-0": {"pool": "cpu"},
    }.items()
}


def workload(*sets: tuple[str, int, str, int]) -> dict[str, Any]:
    """Pod sets (name, pods, GPU flavor, GPUs per pod), admitted."""
    return {
        "metadata": {"name": "job-train-1", "namespace": "ns"},
        "spec": {"podSets": [{"name": n, "count": c} for n, c, _, _ in sets]},
        "status": {
            "admission": {
                "clusterQueue": "cq",
                "podSetAssignments": [
                    {
                        "name": n,
                        "count": c,
                        "flavors": {GPU: fl, "cpu": fl},
                        "resourceUsage": {GPU: str(c * g), "cpu": str(c)},
                    }
                    for n, c, fl, g in sets
                ],
            }
        },
    }


TRAIN = workload(("main", 2, "a100", 4))
SLICE_JOB: dict[str, Any] = {
    "metadata": {"name": "job-slice-1", "namespace": "ns"},
    "spec": {"podSets": [{"name": "main", "count": 1}]},
    "status": {
        "admission": {
            "clusterQueue": "cq",
            "podSetAssignments": [
                {"name": "main", "count": 1, "flavors": {MIG: "mig"}, "resourceUsage": {MIG: "1"}}
            ],
        }
    },
}


def pod(
    name: str,
    node: str | None = "a100-0",
    gpus: int = 4,
    *,
    created: str = "2026-01-01T00:00:00Z",
    phase: str = "Running",
    deleting: bool = False,
    resource: str = GPU,
) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": "ns", "creationTimestamp": created}
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T01:00:00Z"
    spec: dict[str, Any] = {
        "containers": [{"name": "c", "resources": {"requests": {resource: str(gpus), "cpu": "1"}}}]
    }
    if node is not None:
        spec["nodeName"] = node
    return {"metadata": meta, "spec": spec, "status": {"phase": phase}}


LATE = "2026-01-01T00:05:00Z"


@pytest.mark.parametrize(
    ("case", "wl", "pods", "want"),
    [
        ("the admitted pods, running", TRAIN, [pod("a"), pod("b", "a100-1")], []),
        ("one pod still to come", TRAIN, [pod("a")], []),
        (
            "a third pod claims the Job",
            TRAIN,
            [pod("a"), pod("b"), pod("rogue", created=LATE)],
            [(PODS, ("rogue",)), (GPUS, ("rogue",))],
        ),
        (
            "a failed pod and its replacement",
            TRAIN,
            [pod("a"), pod("b", phase="Failed"), pod("b2", created=LATE)],
            [],
        ),
        (
            "a terminating pod and its replacement",
            TRAIN,
            [pod("a"), pod("b", deleting=True), pod("b2", created=LATE)],
            [],
        ),
        ("a pod not bound yet is not running", TRAIN, [pod("a"), pod("b"), pod("c", None)], []),
        (
            "a pod asks for more GPUs than admitted",
            TRAIN,
            [pod("a"), pod("b", gpus=8)],
            [(GPUS, ("b",))],
        ),
        (
            "a pod runs on the h100 flavor's node",
            TRAIN,
            [pod("a"), pod("b", "h100-0")],
            [(FLAVOR, ("b",))],
        ),
        ("a node the cache has not seen is not judged", TRAIN, [pod("a"), pod("b", "new")], []),
        (
            "a MIG flavor: the stand-in device counts as the GPU it serves",
            workload(("main", 2, "mig", 1)),
            [pod("a", "mig-0", 1, resource=MIG), pod("b", "mig-0", 1, resource=MIG)],
            [],
        ),
        (
            "a MIG flavor: more slices than admitted",
            workload(("main", 2, "mig", 1)),
            [pod("a", "mig-0", 1, resource=MIG), pod("b", "mig-0", 3, resource=MIG)],
            [(GPUS, ("b",))],
        ),
        (
            "a job asking for a slice by its own name, on a flavor serving it",
            SLICE_JOB,
            [pod("a", "mig-0", 1, resource=MIG)],
            [],
        ),
        (
            "a job asking for a slice by its own name, then for more",
            SLICE_JOB,
            [pod("a", "mig-0", 2, resource=MIG)],
            [(GPUS, ("a",))],
        ),
        (
            "a slice job whose pod asks for a whole GPU instead",
            SLICE_JOB,
            [pod("a", "mig-0", 1)],
            [(GPUS, ("a",))],
        ),
        (
            "two GPU flavors: the pods moved from a100 to h100 nodes",
            workload(("w", 2, "a100", 4), ("x", 1, "h100", 4)),
            [pod("a", "h100-0", created=LATE), pod("b", "h100-0"), pod("c", "a100-0")],
            [(GPUS, ("a",))],
        ),
        (
            "a CPU-only pod set on the cpu flavor runs on a GPU node",
            workload(("driver", 1, "cpu", 0), ("w", 1, "a100", 4)),
            [pod("d", "h100-0", 0), pod("w", "a100-0")],
            [(FLAVOR, ("d",))],
        ),
        (
            "a flavor without nodeLabels fits every node",
            workload(("main", 2, "any", 4)),
            [pod("a", "h100-0"), pod("b", "cpu-0")],
            [],
        ),
        (
            "an admission without GPUs, a GPU pod",
            workload(("main", 1, "cpu", 0)),
            [pod("a", "cpu-0", 2)],
            [(GPUS, ("a",))],
        ),
    ],
)
def test_what_runs_against_what_was_admitted(
    case: str,
    wl: dict[str, Any],
    pods: list[dict[str, Any]],
    want: list[tuple[str, tuple[str, ...]]],
) -> None:
    got = excess(wl, pods, NODES, FLAVORS)
    assert [(e.kind, e.pods) for e in got] == want, case


def test_a_pod_set_over_its_count_is_named_when_pods_can_be_told_apart() -> None:
    """A plain pod group: a driver and two workers; a pod shaped like a worker replaced the
    driver, so the total fits but the workers' pod set runs three."""
    wl = workload(("driver", 1, "cpu", 0), ("worker", 2, "a100", 4))
    pods = [pod("w0"), pod("w1"), pod("w2", created=LATE)]
    got = excess(wl, pods, NODES, FLAVORS, lambda p: "worker")
    assert [(e.kind, e.pods) for e in got] == [(POD_SET, ("w2",)), (GPUS, ("w2",))]
    assert "pod set worker: 3 pods run, 2 admitted" in describe(got)


def test_a_workload_without_an_admission_has_no_excess() -> None:
    assert excess({"metadata": {"name": "x"}}, [pod("a")], NODES, FLAVORS) == []


def test_the_description_names_the_pods() -> None:
    found = [Excess(PODS, tuple(f"p{i:02}" for i in range(12)), "12 pods run, 0 admitted")]
    assert describe(found) == (
        "12 pods run, 0 admitted (pods: p00, p01, p02, p03, p04, p05, p06, p07, p08, p09 "
        "and 2 more)"
    )


def test_pods_created_in_the_same_second_are_all_named() -> None:
    """creationTimestamp has second resolution: a pod made in the same second as the Job's own
    cannot be told from them by age, so the message names each of them."""
    pods = [pod("train-a"), pod("train-b"), pod("extra")]
    (extra, gpus) = excess(TRAIN, pods, NODES, FLAVORS)
    assert (extra.kind, extra.pods, extra.alike) == (PODS, ("train-b",), ("extra", "train-a"))
    assert gpus.pods == ("train-b",)
    assert describe([extra, gpus]).endswith(
        "(pods: train-b; or, created in the same second: extra, train-a)"
    )
