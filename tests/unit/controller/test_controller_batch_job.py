"""The batch/v1 Job adapter: the Workload a Job asks for, and the patches that start/stop it."""

from __future__ import annotations

from typing import Any

import pytest

from queuectl.api import names
from queuectl.jobs import JobKind, PodSetPlacement
from queuectl.jobs.batch import BatchJob
from queuectl.jobs.workload import workload_name_for

ADAPTER: JobKind = BatchJob()
AFF = "requiredDuringSchedulingIgnoredDuringExecution"


def job(**spec: Any) -> dict[str, Any]:
    template = spec.pop("template", None) or {
        "metadata": {"annotations": {names.ANNOTATION_PODSET_REQUIRED_TOPOLOGY: "rack"}},
        "spec": {
            "containers": [{"name": "c", "resources": {"requests": {"nvidia.com/gpu": "8"}}}],
            "tolerations": [{"key": "own", "operator": "Exists"}],
        },
    }
    return {
        "metadata": {
            "name": "train",
            "namespace": "ns",
            "uid": "u-1",
            "labels": {
                names.LABEL_QUEUE_NAME: "lq",
                names.LABEL_PRIORITY_CLASS: "research",
                names.LABEL_MAX_EXEC_TIME: "3600",
            },
        },
        "spec": {"suspend": True, "template": template, **spec},
    }


def test_workload_name_is_deterministic_label_safe_and_unique_per_uid() -> None:
    a = workload_name_for("job", "x" * 300, "uid-1")
    assert a == workload_name_for("job", "x" * 300, "uid-1")
    assert len(a) <= 63 and a.startswith("job-x")
    assert a != workload_name_for("job", "x" * 300, "uid-2")
    assert not workload_name_for("job", "a" * 49 + "-.b", "u").split("-")[-2].endswith(".")


@pytest.mark.parametrize(
    ("parallelism", "completions", "count"),
    [(None, None, 1), (4, None, 4), (4, 2, 2), (4, 8, 4)],
)
def test_pod_count(parallelism: int | None, completions: int | None, count: int) -> None:
    spec = {k: v for k, v in {"parallelism": parallelism, "completions": completions}.items() if v}
    assert ADAPTER.workload_spec(job(**spec))["podSets"][0]["count"] == count


def test_workload_spec_reads_queue_priority_topology_and_max_time() -> None:
    spec = ADAPTER.workload_spec(job(parallelism=4))
    assert spec["queueName"] == "lq"
    assert spec["priorityClassName"] == "research"
    assert spec["maximumExecutionTimeSeconds"] == 3600
    assert spec["podSets"][0]["topologyRequest"] == {"required": "rack"}


def test_run_patch_injects_over_the_original_template_and_unsuspends() -> None:
    j = job()
    pod_sets = ADAPTER.workload_spec(j)["podSets"]
    placement = PodSetPlacement(
        "main",
        node_labels={names.LABEL_GPU_PRODUCT: "H100"},
        tolerations=({"key": "gpu", "operator": "Exists", "effect": "NoSchedule"},),
        domain={"rack": ("r1",)},
    )
    patch = ADAPTER.run_patch(j, pod_sets, [placement])
    assert patch["spec"]["suspend"] is False
    pod = patch["spec"]["template"]["spec"]
    (term,) = pod["affinity"]["nodeAffinity"][AFF]["nodeSelectorTerms"]
    assert term["matchExpressions"] == [
        {"key": names.LABEL_GPU_PRODUCT, "operator": "In", "values": ["H100"]},
        {"key": "rack", "operator": "In", "values": ["r1"]},
    ]
    assert pod["tolerations"] == [
        {"key": "own", "operator": "Exists"},
        {"key": "gpu", "operator": "Exists", "effect": "NoSchedule"},
    ]
    # injecting again (after a requeue) starts from the original template: nothing stacks
    assert ADAPTER.run_patch(j, pod_sets, [placement]) == patch


def test_every_original_node_selector_term_gets_the_placement() -> None:
    terms: list[dict[str, Any]] = [
        {"matchExpressions": [{"key": "a", "operator": "Exists"}]},
        {"matchFields": []},
    ]
    template = {
        "spec": {
            "containers": [],
            "affinity": {"nodeAffinity": {AFF: {"nodeSelectorTerms": terms}}},
        }
    }
    j = job(template=template)
    pod_sets = ADAPTER.workload_spec(j)["podSets"]
    patch = ADAPTER.run_patch(j, pod_sets, [PodSetPlacement("main", {"f": "v"})])
    got = patch["spec"]["template"]["spec"]["affinity"]["nodeAffinity"][AFF]["nodeSelectorTerms"]
    assert [len(t["matchExpressions"]) for t in got] == [2, 1]
    assert terms[0]["matchExpressions"] == [{"key": "a", "operator": "Exists"}]  # not mutated


def test_restore_removes_what_was_injected() -> None:
    j = job()
    pod_sets = ADAPTER.workload_spec(j)["podSets"]
    run = ADAPTER.run_patch(j, pod_sets, [PodSetPlacement("main", {"f": "v"}, ({"key": "t"},))])
    j["spec"]["template"]["spec"].update(run["spec"]["template"]["spec"])
    restore = ADAPTER.restore_patch(j, pod_sets)
    assert restore is not None
    pod = restore["spec"]["template"]["spec"]
    assert pod["affinity"]["nodeAffinity"][AFF] is None  # merge patch null deletes
    assert pod["tolerations"] == [{"key": "own", "operator": "Exists"}]
    j["spec"]["template"]["spec"]["tolerations"] = pod["tolerations"]
    del j["spec"]["template"]["spec"]["affinity"]
    assert ADAPTER.restore_patch(j, pod_sets) is None


@pytest.mark.parametrize(
    ("status", "finished", "gone", "restorable"),
    [
        ({}, None, True, True),
        ({"active": 2, "startTime": "t"}, None, False, False),
        ({"active": 0, "terminating": 1}, None, False, True),
        ({"conditions": [{"type": "Complete", "status": "True"}]}, True, True, True),
        ({"conditions": [{"type": "Failed", "status": "True"}]}, False, True, True),
        ({"conditions": [{"type": "Failed", "status": "False"}]}, None, True, True),
    ],
)
def test_job_state(
    status: dict[str, Any], finished: bool | None, gone: bool, restorable: bool
) -> None:
    j = {**job(), "status": status}
    f = ADAPTER.finished(j)
    assert (None if f is None else f.succeeded) == finished
    assert ADAPTER.pods_gone(j) == gone
    assert ADAPTER.can_restore(j) == restorable


def test_one_pod_set_named_main_from_the_template() -> None:
    j = job(parallelism=4, completions=2)
    (only,) = ADAPTER.pod_sets(j)
    assert (only.name, only.count, only.count_from) == (
        "main",
        2,
        "parallelism, at most completions",
    )
    assert only.template == j["spec"]["template"]
    assert ADAPTER.pod_priority_class(job()) is None
    with_class = job(template={"spec": {"priorityClassName": "high", "containers": []}})
    assert ADAPTER.pod_priority_class(with_class) == "high"


@pytest.mark.parametrize(
    ("spec", "ops"),
    [
        ({"suspend": True}, []),
        ({"suspend": False}, [{"op": "add", "path": "/spec/suspend", "value": True}]),
        ({}, [{"op": "add", "path": "/spec/suspend", "value": True}]),
        (None, [{"op": "add", "path": "/spec", "value": {"suspend": True}}]),
    ],
)
def test_created_suspended_by_the_webhook(spec: dict[str, Any] | None, ops: list[Any]) -> None:
    j: dict[str, Any] = {"metadata": {"name": "x"}}
    if spec is not None:
        j["spec"] = spec
    assert ADAPTER.suspend_ops(j) == ops
    assert ADAPTER.is_suspended(j) == bool((spec or {}).get("suspend"))
    assert ADAPTER.suspend_patch(j) == {"spec": {"suspend": True}}
    assert ADAPTER.suspend_field == "spec.suspend"
