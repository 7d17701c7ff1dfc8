"""PyTorchJob as training-operator v1.8.1 runs it: Master and Worker are pod sets of their
replicas; spec.runPolicy.suspend holds it; placement reaches both templates (and keeps the
user's own node affinity terms); restore undoes it; status read from its conditions."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from queuectl import convert
from queuectl.api import names
from queuectl.jobs import PodSetPlacement
from queuectl.jobs.pytorch import PyTorchJob
from queuectl.jobs.registry import KINDS
from tests.unit.jobs.jobs_helpers import AFFINITY, apply_merge, required

SAMPLE = Path(__file__).parent / "samples" / "pytorchjob.yaml"


def sample() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load(SAMPLE.read_text())
    return loaded


def test_master_and_workers_are_pod_sets_in_a_stable_order() -> None:
    kind = KINDS["PyTorchJob"]
    assert isinstance(kind, PyTorchJob)
    sets = kind.pod_sets(sample())
    assert [(s.name, s.count) for s in sets] == [("master", 1), ("worker", 3)]
    job = sample()
    del job["spec"]["pytorchReplicaSpecs"]["Worker"]
    del job["spec"]["pytorchReplicaSpecs"]["Master"]["replicas"]
    assert [(s.name, s.count) for s in kind.pod_sets(job)] == [("master", 1)]


@pytest.mark.parametrize(
    ("spec", "ops"),
    [
        (
            {"pytorchReplicaSpecs": {}},
            [{"op": "add", "path": "/spec/runPolicy", "value": {"suspend": True}}],
        ),
        (
            {"runPolicy": {"cleanPodPolicy": "None"}},
            [{"op": "add", "path": "/spec/runPolicy/suspend", "value": True}],
        ),
        ({"runPolicy": {"suspend": True}}, []),
    ],
)
def test_it_is_created_suspended_through_run_policy(spec: dict[str, Any], ops: list[Any]) -> None:
    kind = PyTorchJob()
    assert kind.suspend_ops({"spec": spec}) == ops
    assert kind.suspend_field == "spec.runPolicy.suspend"
    assert kind.suspend_patch({}) == {"spec": {"runPolicy": {"suspend": True}}}


def test_placement_reaches_master_and_workers_and_restore_undoes_it() -> None:
    kind, job = PyTorchJob(), sample()
    job["spec"]["runPolicy"] = {"suspend": True}
    pod_sets = kind.workload_spec(job)["podSets"]
    placements = [
        PodSetPlacement(n, node_labels={names.LABEL_GPU_PRODUCT: "H100"})
        for n in ("master", "worker")
    ]
    running = apply_merge(job, kind.run_patch(job, pod_sets, placements))
    assert not kind.is_suspended(running)
    specs = running["spec"]["pytorchReplicaSpecs"]
    product = {"key": names.LABEL_GPU_PRODUCT, "operator": "In", "values": ["H100"]}
    master = specs["Master"]["template"]
    assert master["spec"]["affinity"]["nodeAffinity"][AFFINITY]["nodeSelectorTerms"] == [
        {"matchExpressions": [product]}
    ]
    worker_terms = specs["Worker"]["template"]["spec"]["affinity"]["nodeAffinity"][AFFINITY]
    assert worker_terms["nodeSelectorTerms"][0]["matchExpressions"] == [
        {"key": "zone", "operator": "In", "values": ["a"]},
        product,
    ]
    assert master["metadata"]["labels"][names.LABEL_WORKLOAD] == kind.workload_name(job)
    running["spec"]["runPolicy"]["suspend"] = True
    restored = apply_merge(running, kind.restore_patch(running, pod_sets))
    for rtype in ("Master", "Worker"):
        now = restored["spec"]["pytorchReplicaSpecs"][rtype]["template"]["spec"]
        was = job["spec"]["pytorchReplicaSpecs"][rtype]["template"]["spec"]
        assert required(now) == required(was) and now.get("tolerations") == was.get("tolerations")
    assert kind.restore_patch(restored, pod_sets) is None


@pytest.mark.parametrize(
    ("status", "gone", "finished"),
    [
        ({}, True, None),
        ({"replicaStatuses": {"Master": {"active": 1}, "Worker": {"active": 3}}}, False, None),
        (  # deleted, and said so, in one status write
            {
                "replicaStatuses": {"Master": {"active": 0}, "Worker": {}},
                "conditions": [{"type": "Suspended", "status": "True"}],
            },
            True,
            None,
        ),
        ({"conditions": [{"type": "Succeeded", "status": "True"}]}, True, True),
        ({"conditions": [{"type": "Failed", "status": "True", "message": "oom"}]}, True, False),
        ({"conditions": [{"type": "Succeeded", "status": "False"}]}, True, None),
    ],
)
def test_status_as_the_training_operator_reports_it(
    status: dict[str, Any], gone: bool, finished: bool | None
) -> None:
    job = {**sample(), "status": status}
    assert PyTorchJob().pods_gone(job) is gone
    fin = PyTorchJob().finished(job)
    assert (fin.succeeded if fin else None) is finished


@pytest.mark.parametrize(
    ("annotations", "asks"),
    [
        (
            {
                names.ANNOTATION_PODSET_REQUIRED_TOPOLOGY: "rack",
                names.ANNOTATION_PODSET_GROUP_NAME: "ddp",
            },
            {"required": "rack", "podSetGroupName": "ddp"},
        ),
        ({names.ANNOTATION_PODSET_GROUP_NAME: "ddp"}, None),  # a group needs a level
    ],
)
def test_master_and_workers_naming_one_pod_set_group_reach_the_core_as_one_group(
    annotations: dict[str, str], asks: dict[str, str] | None
) -> None:
    """The master and its workers ask for one rack together: the Workload carries the group
    name on both pod sets, and the core reads it (`queuectl.core.podset_groups`)."""
    job = sample()
    for role in ("Master", "Worker"):
        template = job["spec"]["pytorchReplicaSpecs"][role]["template"]
        template.setdefault("metadata", {})["annotations"] = dict(annotations)
    spec = KINDS["PyTorchJob"].workload_spec(job)
    assert [ps.get("topologyRequest") for ps in spec["podSets"]] == [asks, asks]
    groups = [convert.podset(ps).topology for ps in spec["podSets"]]
    assert [t.group if t else None for t in groups] == [(asks or {}).get("podSetGroupName")] * 2
