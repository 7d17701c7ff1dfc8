"""The bypass fuzzer's mutation list is generated from the objects, not written by hand: every
count field of every kind, every pod template's placement and resources, and every queuectl
key are found; each mutation can be undone; a bounded sample still covers every category."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from bench.bypass.attempt import Outcome, inverse
from bench.bypass.claims import owner_mutations
from bench.bypass.fuzz import KindReport, spread
from bench.bypass.kinds import CASES
from bench.bypass.mutations import object_mutations, our_keys
from bench.bypass.report import markdown
from queuectl.api import names


def apply(obj: Any, ops: list[dict[str, Any]]) -> Any:
    """Just enough RFC 6902 (add, replace, remove) for these tests."""
    obj = copy.deepcopy(obj)
    for op in ops:
        *parents, last = [
            p.replace("~1", "/").replace("~0", "~") for p in op["path"].split("/")[1:]
        ]
        at = obj
        for p in parents:
            at = at[int(p)] if isinstance(at, list) else at[p]
        if isinstance(at, list):
            if op["op"] == "remove":
                del at[int(last)]
            elif last == "-":
                at.append(op["value"])
            elif op["op"] == "add":
                at.insert(int(last), op["value"])
            else:
                at[int(last)] = op["value"]
        elif op["op"] == "remove":
            del at[last]
        else:
            at[last] = op["value"]
    return obj


COUNTS = {
    "Job": {"/spec/parallelism", "/spec/completions"},
    "JobSet": {
        "/spec/replicatedJobs/0/replicas",
        "/spec/replicatedJobs/0/template/spec/parallelism",
    },
    "RayCluster": {
        "/spec/workerGroupSpecs/0/replicas",
        "/spec/workerGroupSpecs/0/minReplicas",
        "/spec/workerGroupSpecs/0/maxReplicas",
    },
    "RayJob": {"/spec/rayClusterSpec/workerGroupSpecs/0/replicas"},
    "PyTorchJob": {"/spec/pytorchReplicaSpecs/Worker/replicas"},
    "MPIJob": {
        "/spec/mpiReplicaSpecs/Worker/replicas",
        "/spec/mpiReplicaSpecs/Launcher/replicas",
    },
    "TrainJob": {"/spec/trainer/numNodes"},
    "LeaderWorkerSet": {"/spec/replicas", "/spec/leaderWorkerTemplate/size"},
}


def paths(ms: list[Any]) -> set[str]:
    return {op["path"] for m in ms for op in m.ops}


@pytest.mark.parametrize("kind", sorted(COUNTS))
def test_every_count_field_of_a_kind_is_found(kind: str) -> None:
    obj = CASES[kind].make("a", "ns", "lq", 2)[0]
    assert COUNTS[kind] <= paths(object_mutations("object", obj))


@pytest.mark.parametrize("kind", sorted(set(CASES) - {"TrainJob"}))
def test_each_pod_template_gets_placement_and_resource_mutations(kind: str) -> None:
    obj = CASES[kind].make("a", "ns", "lq", 2)[0]
    ms = object_mutations("object", obj)
    whats = [m.what for m in ms]
    for needle in ("nodeSelector", "affinity", "tolerations", "nodeName", "containers: one more"):
        assert any(needle in w for w in whats), (kind, needle)
    assert any(f"{names.GPU_RESOURCE} -> 8" in w for w in whats), kind


def test_a_trainjob_is_placed_through_overrides_and_sized_through_its_runtime() -> None:
    """Its pod template is its runtime's: the TrainJob itself holds numNodes, resources per
    node, the runtimeRef and, once admitted, podTemplateOverrides."""
    obj = CASES["TrainJob"].make("a", "ns", "lq", 2)[0]
    whats = [m.what for m in object_mutations("object", obj)]
    assert any("podTemplateOverrides: nodeSelector" in w for w in whats)
    assert any("runtimeRef/name" in w for w in whats)
    assert any("resourcesPerNode: requests GPUs" in w for w in whats)
    admitted = copy.deepcopy(obj)
    admitted["spec"]["podTemplateOverrides"] = [
        {"targetJobs": [{"name": "node"}], "spec": {"nodeSelector": {"a": "b"}, "tolerations": []}}
    ]
    whats = [m.what for m in object_mutations("object", admitted)]
    assert "/spec/podTemplateOverrides/0/spec/nodeSelector removed" in whats
    assert "/spec/podTemplateOverrides/0/spec/tolerations: tolerate every taint" in whats


def test_every_key_of_ours_is_added_on_the_job_and_its_pod_template() -> None:
    ms = object_mutations("object", CASES["Job"].make("a", "ns", "lq", 2)[0])
    keys = [k for k, sort in our_keys().items() if sort != "gate"]
    assert names.ANNOTATION_GPU_RESOURCE in keys and names.LABEL_QUEUE_NAME in keys
    whats = " ".join(m.what for m in ms)
    for key in keys:
        assert f"/metadata/labels[{key}]" in whats or f"/metadata/annotations[{key}]" in whats
        assert "/spec/template/metadata/" in whats
    # the queue label is there already: changed and removed, not added
    assert f"/metadata/labels[{names.LABEL_QUEUE_NAME}] changed" in whats
    assert f"/metadata/labels[{names.LABEL_QUEUE_NAME}] removed" in whats


@pytest.mark.parametrize("kind", sorted(CASES))
def test_each_mutation_is_undone_by_its_inverse(kind: str) -> None:
    obj = CASES[kind].make("a", "ns", "lq", 2)[0]
    for m in object_mutations("object", obj):
        changed = apply(obj, list(m.ops))
        assert changed != obj or m.what.endswith("removed"), m.ident
        assert apply(changed, inverse(obj, list(m.ops))) == obj, m.ident


def test_a_bounded_sample_touches_every_category_and_role() -> None:
    obj = CASES["Job"].make("a", "ns", "lq", 2)[0]
    ms = object_mutations("object", obj) + object_mutations("queued", obj)
    ms += owner_mutations("object", "Job")
    buckets = {(m.category, m.role) for m in ms}
    first = spread(ms, len(buckets), seed=1)
    assert {(m.category, m.role) for m in first} == buckets
    assert spread(ms, 5, seed=1) == spread(ms, 5, seed=1)  # deterministic
    assert sorted(m.ident for m in spread(ms, None, seed=2)) == sorted(m.ident for m in ms)


def test_the_report_counts_each_outcome_per_kind_and_lists_the_violations() -> None:
    done = KindReport("Job", generated=4, worlds=2)
    for result in ("refused", "refused", "transient", "harmless", "violation"):
        done.outcomes.append(Outcome("Job", "field", "child:Job", "/spec/parallelism", result, "x"))
    text = markdown([done, KindReport("JobSet", error="world not built: timed out")], "h")
    assert (
        "| kind | generated | tried | refused | evicted | transient | harmless | violation |"
        in text
    )
    assert "| Job | 4 | 5 | 2 | 0 | 1 | 1 | 1 | 2 |" in text
    assert "| JobSet | 0 | 0 | 0 | 0 | 0 | 0 | 0 | 0 | world not built: timed out |" in text
    assert "| total | 4 | 5 | 2 | 0 | 1 | 1 | 1 | 2 |" in text
    assert "- Job · field · child:Job: /spec/parallelism — x" in text
