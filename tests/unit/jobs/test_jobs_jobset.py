"""JobSet as a job kind: one pod set per replicated job, sized as the JobSet controller runs
them; spec.suspend holds it; placement lands in every replicated job's pod template through
the fields JobSet lets change while suspended (nodeSelector, tolerations) and comes back out.

Manifests are shaped like JobSet's own examples (tests/unit/jobs/samples/)."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from queuectl.api import names
from queuectl.jobs import PodSetPlacement
from queuectl.jobs.jobset import JOBSETS, JobSet
from queuectl.jobs.registry import KINDS, controlled_by
from queuectl.webhooks.jobs import mutate_job, validate_job
from queuectl.webhooks.lookup import InMemoryLookup
from queuectl.webhooks.review import decode_patch

SAMPLES = Path(__file__).parent / "samples"
CONFIG_SAMPLES = Path(__file__).resolve().parents[3] / "config" / "samples" / "kinds"
KIND = JobSet()
NS = "team-a"
LOOKUP = InMemoryLookup(local_queues={(NS, "lq"): "cq-a"})
RACK = names.LABEL_TOPOLOGY_RACK


def sample(name: str) -> dict[str, Any]:
    doc: dict[str, Any] = yaml.safe_load((SAMPLES / name).read_text())
    return doc


def review(obj: dict[str, Any], old: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "uid": "u",
        "kind": {"group": JOBSETS.group, "version": JOBSETS.version, "kind": "JobSet"},
        "operation": "UPDATE" if old is not None else "CREATE",
        "name": obj["metadata"]["name"],
        "namespace": NS,
        "userInfo": {"username": "alice"},
        "object": obj,
        "oldObject": old,
    }


def rjob_pod_spec(job: dict[str, Any], name: str) -> dict[str, Any]:
    rjob = next(r for r in job["spec"]["replicatedJobs"] if r["name"] == name)
    spec: dict[str, Any] = rjob["template"]["spec"]["template"]["spec"]
    return spec


def applied(job: dict[str, Any], patch: dict[str, Any]) -> dict[str, Any]:
    """The JobSet after a merge patch (lists replace, dicts merge)."""
    out = copy.deepcopy(job)
    out["spec"].update(copy.deepcopy(patch["spec"]))
    return out


# --- pod sets ---------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("manifest", "expected"),
    [
        ("jobset-driver-workers.yaml", [("driver", 1), ("workers", 8)]),  # 2 Jobs x 4 pods
        ("jobset-defaults.yaml", [("one", 1), ("capped", 6)]),  # 3 Jobs x min(5, 2)
    ],
)
def test_each_replicated_job_is_one_pod_set_of_replicas_times_its_pods(
    manifest: str, expected: list[tuple[str, int]]
) -> None:
    assert [(ps.name, ps.count) for ps in KIND.pod_sets(sample(manifest))] == expected


def test_the_config_sample_is_a_gang_of_four_eight_gpu_pods_in_one_rack() -> None:
    job = yaml.safe_load((CONFIG_SAMPLES / "jobset.yaml").read_text())
    (workers,) = KIND.workload_spec(job)["podSets"]
    limits = workers["template"]["spec"]["containers"][0]["resources"]["limits"]
    assert (workers["count"], limits[names.GPU_RESOURCE]) == (4, "8")
    assert workers["topologyRequest"] == {"required": RACK}


def test_the_workload_carries_queue_priority_and_each_role_template() -> None:
    job = sample("jobset-driver-workers.yaml")
    spec = KIND.workload_spec(job)
    assert spec["queueName"] == "lq"
    assert spec["priorityClassName"] == "research"
    assert [ps["name"] for ps in spec["podSets"]] == ["driver", "workers"]
    assert "topologyRequest" not in spec["podSets"][0]
    assert spec["podSets"][1]["topologyRequest"] == {"required": RACK}
    assert KIND.pod_priority_class(job) == "high"  # the driver's template
    assert KIND.workload_name(job).startswith("jobset-driver-workers-")
    assert KIND.workload_name(job) != KIND.workload_name(
        {**job, "metadata": {**job["metadata"], "uid": "other"}}
    )


# --- suspend -----------------------------------------------------------------------------------
def test_created_suspended_through_spec_suspend() -> None:
    job = sample("jobset-driver-workers.yaml")
    assert KIND.suspend_ops(job) == [{"op": "add", "path": "/spec/suspend", "value": True}]
    assert not KIND.is_suspended(job)
    job["spec"]["suspend"] = True
    assert KIND.suspend_ops(job) == []
    assert KIND.is_suspended(job)
    assert KIND.suspend_patch(job) == {"spec": {"suspend": True}}


def test_the_webhook_suspends_a_queued_jobset_and_names_spec_suspend_in_refusals() -> None:
    job = sample("jobset-driver-workers.yaml")
    ops = decode_patch(mutate_job(review(job), LOOKUP))
    assert {"op": "add", "path": "/spec/suspend", "value": True} in ops
    message = validate_job(review(job), LOOKUP)["status"]["message"]
    assert "must be created with spec.suspend=true" in message, message


def test_scaling_a_running_jobsets_workers_is_refused_naming_the_role() -> None:
    old = sample("jobset-driver-workers.yaml")
    new = copy.deepcopy(old)
    new["spec"]["replicatedJobs"][1]["replicas"] = 3
    message = validate_job(review(new, old), LOOKUP)["status"]["message"]
    assert (
        "pod set 'workers': the pods it runs at once (replicas x parallelism, at most "
        "completions) from 8 to 12" in message
    ), message


def test_unsuspending_a_queued_jobset_by_hand_is_refused() -> None:
    old = sample("jobset-driver-workers.yaml")
    old["spec"]["suspend"] = True
    new = copy.deepcopy(old)
    new["spec"]["suspend"] = False
    message = validate_job(review(new, old), LOOKUP)["status"]["message"]
    assert "cannot be unsuspended by hand" in message, message


# --- admission -> scheduling fields --------------------------------------------------------------
PLACEMENTS = [
    PodSetPlacement(
        "driver",
        {names.LABEL_GPU_PRODUCT: "NVIDIA-H100-80GB-HBM3"},
        tolerations=({"key": "gpu", "operator": "Exists", "effect": "NoSchedule"},),
    ),
    PodSetPlacement(
        "workers",
        {names.LABEL_GPU_PRODUCT: "NVIDIA-H100-80GB-HBM3"},
        tolerations=({"key": "gpu", "operator": "Exists", "effect": "NoSchedule"},),
        domain={names.LABEL_TOPOLOGY_BLOCK: ("b1",), RACK: ("r2",)},
    ),
]


def test_admission_becomes_node_selectors_and_tolerations_in_every_replicated_job() -> None:
    job = sample("jobset-driver-workers.yaml")
    job["spec"]["suspend"] = True
    pod_sets = KIND.workload_spec(job)["podSets"]
    patch = KIND.run_patch(job, pod_sets, PLACEMENTS)
    assert patch["spec"]["suspend"] is False
    running = applied(job, patch)
    assert not KIND.is_suspended(running)
    driver, workers = rjob_pod_spec(running, "driver"), rjob_pod_spec(running, "workers")
    assert driver["nodeSelector"] == {names.LABEL_GPU_PRODUCT: "NVIDIA-H100-80GB-HBM3"}
    assert workers["nodeSelector"] == {
        "team": "a",  # the user's own stays
        names.LABEL_GPU_PRODUCT: "NVIDIA-H100-80GB-HBM3",
        names.LABEL_TOPOLOGY_BLOCK: "b1",
        RACK: "r2",
    }
    assert workers["tolerations"] == [
        {"key": "dedicated", "operator": "Equal", "value": "a", "effect": "NoSchedule"},
        {"key": "gpu", "operator": "Exists", "effect": "NoSchedule"},
    ]
    workload_label = {names.LABEL_WORKLOAD: KIND.workload_name(job)}
    for rjob in running["spec"]["replicatedJobs"]:
        assert rjob["template"]["spec"]["template"]["metadata"]["labels"] == workload_label
    # Node affinity is not touched: JobSet refuses it while suspended and never copies it on.
    assert "affinity" not in driver and "affinity" not in workers
    # Everything else of the JobSet is as it was: the shape the quota was sized for.
    assert KIND.pod_sets(running)[1].count == 8
    assert running["spec"]["replicatedJobs"][1]["replicas"] == 2


def test_injecting_twice_never_stacks_and_restore_puts_back_what_the_workload_recorded() -> None:
    job = sample("jobset-driver-workers.yaml")
    job["spec"]["suspend"] = True
    pod_sets = KIND.workload_spec(job)["podSets"]
    once = applied(job, KIND.run_patch(job, pod_sets, PLACEMENTS))
    twice = applied(once, KIND.run_patch(once, pod_sets, PLACEMENTS))
    assert twice == once
    once["spec"]["suspend"] = True
    restore = KIND.restore_patch(once, pod_sets)
    assert restore is not None
    back = applied(once, restore)
    assert rjob_pod_spec(back, "workers") == rjob_pod_spec(job, "workers")
    assert "nodeSelector" not in rjob_pod_spec(back, "driver")
    assert "tolerations" not in rjob_pod_spec(back, "driver")
    assert KIND.restore_patch(back, pod_sets) is None
    assert back == job  # labels too: the workload label comes back out
    assert KIND.restore_patch(job, pod_sets) is None


def test_a_spread_over_several_nodes_is_left_out_a_node_selector_cannot_say_it() -> None:
    job = sample("jobset-defaults.yaml")
    pod_sets = KIND.workload_spec(job)["podSets"]
    spread = PodSetPlacement("capped", {"gpu": "a100"}, domain={names.LABEL_HOSTNAME: ("n1", "n2")})
    running = applied(job, KIND.run_patch(job, pod_sets, [spread]))
    assert rjob_pod_spec(running, "capped")["nodeSelector"] == {"gpu": "a100"}
    assert "nodeSelector" not in rjob_pod_spec(running, "one")


def test_without_placement_it_unsuspends_and_labels_each_template_with_its_workload() -> None:
    job = sample("jobset-defaults.yaml")
    job["metadata"]["labels"][names.LABEL_WORKLOAD] = "jobset-minimal-0123abcd"
    pod_sets = KIND.workload_spec(job)["podSets"]
    running = applied(job, KIND.run_patch(job, pod_sets, []))
    assert not KIND.is_suspended(running)
    for rjob, before in zip(
        running["spec"]["replicatedJobs"], job["spec"]["replicatedJobs"], strict=True
    ):
        template = rjob["template"]["spec"]["template"]
        # The controller knows the pods by this label: their child Jobs carry none of queuectl's.
        assert template["metadata"]["labels"] == {names.LABEL_WORKLOAD: "jobset-minimal-0123abcd"}
        assert template["spec"] == before["template"]["spec"]["template"]["spec"]


# --- status --------------------------------------------------------------------------------------
def status(**fields: Any) -> dict[str, Any]:
    job = sample("jobset-driver-workers.yaml")
    job["status"] = fields
    return job


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        ({}, None),
        (
            {"conditions": [{"type": "Suspended", "status": "True"}]},
            None,
        ),
        (
            {
                "terminalState": "Completed",
                "conditions": [
                    {"type": "Completed", "status": "True", "message": "jobset completed"}
                ],
            },
            (True, names.REASON_FINISHED_SUCCEEDED, "jobset completed"),
        ),
        (
            {
                "terminalState": "Failed",
                "conditions": [
                    {"type": "Failed", "status": "True", "reason": "FailedJobs", "message": ""}
                ],
            },
            (False, names.REASON_FINISHED_FAILED, "FailedJobs"),
        ),
        (
            {"conditions": [{"type": "Failed", "status": "True", "message": "job failed"}]},
            (False, names.REASON_FINISHED_FAILED, "job failed"),
        ),
    ],
)
def test_finished_reads_the_terminal_state(
    fields: dict[str, Any], expected: tuple[bool, str, str] | None
) -> None:
    found = KIND.finished(status(**fields))
    assert (None if found is None else (found.succeeded, found.reason, found.message)) == expected


def test_pods_are_gone_once_no_child_job_has_an_active_pod() -> None:
    def rj(active: int) -> dict[str, Any]:
        return {"name": "workers", "ready": 0, "succeeded": 0, "failed": 0, "active": active}

    assert KIND.pods_gone(status())
    assert not KIND.pods_gone(status(replicatedJobsStatus=[rj(0), rj(2)]))
    assert KIND.pods_gone(status(replicatedJobsStatus=[rj(0), rj(0)]))


def test_registered_once_by_kind_and_group() -> None:
    assert KINDS.for_group_kind("jobset.x-k8s.io", "JobSet") is not None
    assert KINDS.for_owner({"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet"})


# --- its child Jobs are never queued on their own ------------------------------------------------
POD_TEMPLATE = {"spec": {"containers": [{"name": "c", "image": "busybox"}]}}
OWNER = {
    "apiVersion": "jobset.x-k8s.io/v1alpha2",
    "kind": "JobSet",
    "metadata": {
        "name": "driver",
        "namespace": NS,
        "uid": "uid-driver",
        "labels": {names.LABEL_QUEUE_NAME: "lq"},
    },
    "spec": {
        "replicatedJobs": [{"name": "workers", "template": {"spec": {"template": POD_TEMPLATE}}}]
    },
}


def child_job(owner_kind: str, api_version: str) -> dict[str, Any]:
    ref = {"apiVersion": api_version, "kind": owner_kind, "name": "driver", "controller": True}
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": "driver-workers-0",
            "namespace": NS,
            "ownerReferences": [{**ref, "uid": "uid-driver"}],
        },
        "spec": {"template": copy.deepcopy(POD_TEMPLATE)},
    }


def job_review(obj: dict[str, Any]) -> dict[str, Any]:
    return {
        **review(obj),
        "kind": {"group": "batch", "version": "v1", "kind": "Job"},
    }


def test_a_jobsets_child_job_is_not_queued_even_by_a_default_local_queue() -> None:
    """The JobSet is queued whole; queueing its child Jobs too would hold them suspended after
    the JobSet is admitted and count their pods twice."""
    with_default = InMemoryLookup(
        local_queues={(NS, "default"): "cq-a", (NS, "lq"): "cq-a"},
        owners={("jobsets", NS, "driver"): OWNER},
    )
    child = child_job("JobSet", "jobset.x-k8s.io/v1alpha2")
    assert "patch" not in mutate_job(job_review(child), with_default)
    child["metadata"]["labels"] = {names.LABEL_QUEUE_NAME: "lq"}  # even labelled by hand
    assert validate_job(job_review(child), with_default)["allowed"] is True
    assert controlled_by(child, KINDS) is KINDS["JobSet"]
    # A Job a CronJob makes is queued as before: CronJob is not a queued kind.
    cron = child_job("CronJob", "batch/v1")
    ops = decode_patch(mutate_job(job_review(cron), with_default))
    assert {"op": "add", "path": "/spec/suspend", "value": True} in ops
    assert controlled_by(cron, KINDS) is None
