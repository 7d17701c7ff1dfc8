"""config/samples/kinds holds a manifest per kind a user can apply as is: each is a registered
kind, created suspended, sent to a LocalQueue the base samples define, and asks for what its
comment says (pod sets and counts as the operator will run them)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from queuectl.jobs.registry import KINDS

SAMPLES = Path(__file__).resolve().parents[3] / "config" / "samples"


def load(path: Path) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


def base_samples(kind: str) -> list[dict[str, Any]]:
    return [d for p in sorted(SAMPLES.glob("*.yaml")) for d in load(p) if d["kind"] == kind]


def sample_names(kind: str) -> set[str]:
    return {d["metadata"]["name"] for d in base_samples(kind)}


def local_queues() -> set[tuple[str, str]]:
    return {(d["metadata"]["namespace"], d["metadata"]["name"]) for d in base_samples("LocalQueue")}


@pytest.mark.parametrize(
    ("file", "kind", "pod_sets"),
    [
        ("rayjob.yaml", "RayJob", [("head", 1), ("gpu", 2), ("submitter", 1)]),
        ("raycluster.yaml", "RayCluster", [("head", 1), ("gpu", 2)]),  # maxReplicas
        ("pytorchjob.yaml", "PyTorchJob", [("master", 1), ("worker", 3)]),
        ("mpijob.yaml", "MPIJob", [("launcher", 1), ("worker", 4)]),
    ],
)
def test_a_kind_sample_is_queued_suspended_with_its_pod_sets(
    file: str, kind: str, pod_sets: list[tuple[str, int]]
) -> None:
    [job] = load(SAMPLES / "kinds" / file)
    assert job["kind"] == kind
    job_kind = KINDS[kind]
    assert job_kind.is_suspended(job)
    assert job_kind.suspend_ops(job) == []
    queue = job_kind.queue_name(job)
    assert (job["metadata"]["namespace"], queue) in local_queues()
    assert [(p.name, p.count) for p in job_kind.pod_sets(job)] == pod_sets
    spec = job_kind.workload_spec(job)
    assert spec["queueName"] == queue
    assert spec["priorityClassName"] in sample_names("WorkloadPriorityClass")
