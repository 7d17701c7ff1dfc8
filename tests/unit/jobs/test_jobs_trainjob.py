"""TrainJob as a job kind (trainer v2.1.0): its pod sets are its runtime's replicated jobs, read
from the snapshot the webhook records on CREATE, sized as trainer sizes them (numNodes,
resourcesPerNode); spec.suspend holds it; a placement reaches its pods through
spec.podTemplateOverrides in two steps and comes back out.

Runtimes are trainer's own (tests/unit/jobs/samples/trainjob-runtimes.yaml)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from queuectl.api import names
from queuectl.jobs import MissingInput, PodSetPlacement, ReadsInputs
from queuectl.jobs.registry import KINDS, controlled_by, input_resources
from queuectl.jobs.trainjob import CLUSTER_RUNTIMES, RUNTIMES, TrainJob
from tests.unit.jobs.jobs_helpers import apply_merge
from tests.unit.jobs.trainjob_cases import created, docs

KIND = TrainJob()
GPU = names.GPU_RESOURCE
RACK = names.LABEL_TOPOLOGY_RACK
DEDICATED = {"key": "dedicated", "operator": "Exists", "effect": "NoSchedule"}


# --- pod sets -----------------------------------------------------------------------------------
def test_a_torch_trainjob_is_one_pod_set_of_num_nodes_pods_asking_resources_per_node() -> None:
    assert isinstance(KINDS["TrainJob"], TrainJob)
    (node,) = KIND.pod_sets(created())
    assert (node.name, node.count) == ("node", 4)
    (container,) = node.template["spec"]["containers"]
    assert container["resources"] == {"requests": {GPU: "8"}, "limits": {GPU: "8"}}
    # The user's own override is part of the template quota and placement read.
    assert node.template["metadata"]["annotations"] == {
        names.ANNOTATION_PODSET_REQUIRED_TOPOLOGY: RACK
    }
    assert node.template["spec"]["tolerations"] == [DEDICATED]
    assert KIND.workload_spec(created())["podSets"][0]["topologyRequest"] == {"required": RACK}


def test_without_num_nodes_the_runtimes_ml_policy_decides() -> None:
    (node,) = KIND.pod_sets(created(numNodes=None))
    assert node.count == 1
    assert node.count_from == "trainer.numNodes, else the runtime's mlPolicy.numNodes"


def test_initializers_are_pod_sets_of_one_pod_beside_the_trainer() -> None:
    sets = KIND.pod_sets(created("torchtune-llama3.2-1b", numNodes=2, resourcesPerNode=None))
    assert [(s.name, s.count) for s in sets] == [
        ("dataset-initializer", 1),
        ("model-initializer", 1),
        ("node", 2),
    ]
    node = sets[2].template["spec"]["containers"][0]
    assert node["resources"] == {"limits": {GPU: 2}}  # the runtime's own, not replaced


def test_under_mpi_with_the_launcher_as_a_node_num_nodes_counts_the_launcher_too() -> None:
    sets = KIND.pod_sets(created("deepspeed-distributed", numNodes=4))
    assert [(s.name, s.count) for s in sets] == [("launcher", 1), ("node", 3)]
    for ps in sets:  # resourcesPerNode reaches both: the launcher runs as a node
        assert ps.template["spec"]["containers"][0]["resources"]["limits"] == {GPU: "8"}


def test_a_trainjob_without_a_snapshot_has_no_pod_sets_and_is_not_queued() -> None:
    job = docs()["pretrain"]  # labelled, but created before queuectl's webhook ran
    assert KIND.pod_sets(job) == []
    assert KIND.queue_name(job) is None
    assert KIND.queue_name(created()) == "lq"


def test_a_runtime_edited_later_is_not_followed() -> None:
    job = created()
    runtime = docs()["torch-distributed"]
    runtime["spec"]["template"]["spec"]["replicatedJobs"][0]["name"] = "worker"
    assert [s.name for s in KIND.pod_sets(job)] == ["node"]
    assert KIND.snapshot_ops(job, runtime) != []  # only a new TrainJob would read it


# --- the snapshot --------------------------------------------------------------------------------
def test_the_snapshot_is_written_once_and_a_missing_runtime_is_named() -> None:
    job, runtime = docs()["pretrain"], docs()["torch-distributed"]
    (op,) = KIND.snapshot_ops(job, runtime)
    assert op["path"] == "/metadata/annotations"
    snap = json.loads(op["value"][names.ANNOTATION_TRAINJOB_RUNTIME])
    assert (snap["kind"], snap["name"]) == ("ClusterTrainingRuntime", "torch-distributed")
    assert KIND.snapshot_ops(created(), runtime) == []  # already recorded: nothing to do
    with pytest.raises(MissingInput, match="ClusterTrainingRuntime 'torch-distributed'"):
        KIND.snapshot_ops(job, None)


def test_a_namespaced_runtime_is_looked_up_in_the_trainjobs_namespace() -> None:
    job = docs()["pretrain"]
    assert KIND.input_ref(job).resource == CLUSTER_RUNTIMES
    job["spec"]["runtimeRef"]["kind"] = "TrainingRuntime"
    ref = KIND.input_ref(job)
    assert (ref.resource, ref.namespace, ref.name) == (RUNTIMES, "team-a", "torch-distributed")
    assert isinstance(KIND, ReadsInputs)
    assert input_resources(KINDS.values()) == (CLUSTER_RUNTIMES, RUNTIMES)


# --- suspend -------------------------------------------------------------------------------------
def test_created_suspended_through_spec_suspend() -> None:
    job = docs()["pretrain"]
    job["spec"]["suspend"] = False  # the CRD's default
    assert KIND.suspend_ops(job) == [{"op": "add", "path": "/spec/suspend", "value": True}]
    assert not KIND.is_suspended(job)
    assert KIND.is_suspended(created())
    assert KIND.suspend_patch(job) == {"spec": {"suspend": True}}
    assert KIND.suspend_field == "spec.suspend"


# --- admission -> podTemplateOverrides -----------------------------------------------------------
PLACEMENT = PodSetPlacement(
    "node",
    {names.LABEL_GPU_PRODUCT: "NVIDIA-H100-80GB-HBM3"},
    tolerations=({"key": "fleet", "operator": "Equal", "value": "a", "effect": "NoSchedule"},),
    domain={RACK: ("rack-2",), names.LABEL_HOSTNAME: ("n1", "n2", "n3", "n4")},
)


def test_admission_reaches_the_pods_through_overrides_then_unsuspends() -> None:
    job = created()
    recorded = KIND.workload_spec(job)["podSets"]
    first = KIND.run_patch(job, recorded, [PLACEMENT])
    assert "suspend" not in first["spec"]  # trainer refuses overrides changed while unsuspending
    placed = apply_merge(job, first)
    users, ours = placed["spec"]["podTemplateOverrides"]
    assert users == job["spec"]["podTemplateOverrides"][0]  # the user's own entry, kept first
    assert ours == {
        "targetJobs": [{"name": "node"}],
        "metadata": {"labels": {names.LABEL_WORKLOAD: KIND.workload_name(job)}},
        "spec": {
            # one value per label only: the spread over four nodes cannot be a nodeSelector
            "nodeSelector": {names.LABEL_GPU_PRODUCT: "NVIDIA-H100-80GB-HBM3", RACK: "rack-2"},
            # an override's list replaces the template's: the user's toleration stays
            "tolerations": [DEDICATED, dict(PLACEMENT.tolerations[0])],
        },
    }
    # Its Workload still describes it (no drift, no eviction), and the second step unsuspends.
    assert KIND.workload_spec(placed)["podSets"] == recorded
    assert KIND.run_patch(placed, recorded, [PLACEMENT]) == {"spec": {"suspend": False}}


def test_restore_takes_only_queuectls_overrides_back_out() -> None:
    job = created()
    recorded = KIND.workload_spec(job)["podSets"]
    assert KIND.restore_patch(job, recorded) is None
    placed = apply_merge(job, KIND.run_patch(job, recorded, [PLACEMENT]))
    restored = apply_merge(placed, KIND.restore_patch(placed, recorded))
    assert restored["spec"]["podTemplateOverrides"] == job["spec"]["podTemplateOverrides"]
    del job["spec"]["podTemplateOverrides"]
    placed = apply_merge(job, KIND.run_patch(job, recorded, [PLACEMENT]))
    assert KIND.restore_patch(placed, recorded) == {"spec": {"podTemplateOverrides": None}}


# --- status --------------------------------------------------------------------------------------
def with_status(**status: Any) -> dict[str, Any]:
    job = created()
    job["status"] = status
    return job


def jobs_status(active: int) -> list[dict[str, Any]]:
    return [{"name": "node", "active": active, "ready": 0, "succeeded": 0, "failed": 0}]


def test_pods_are_gone_and_templates_restorable_once_no_child_job_is_active() -> None:
    running = with_status(jobsStatus=jobs_status(1))
    assert not KIND.pods_gone(running)
    assert not KIND.can_restore(running)
    stopped = with_status(jobsStatus=jobs_status(0))
    assert KIND.pods_gone(stopped) and KIND.can_restore(stopped)
    stopped["spec"]["suspend"] = False
    assert not KIND.can_restore(stopped)


@pytest.mark.parametrize(
    ("condition", "succeeded"), [("Complete", True), ("Failed", False), ("Suspended", None)]
)
def test_finished_from_trainers_conditions(condition: str, succeeded: bool | None) -> None:
    job = with_status(conditions=[{"type": condition, "status": "True", "message": "m"}])
    found = KIND.finished(job)
    assert (found.succeeded if found else None) is succeeded


def test_the_derived_jobset_is_part_of_the_trainjobs_workload() -> None:
    """trainer makes a JobSet controlled by the TrainJob: never queued on its own, even with a
    queue label (it would count the pods twice and hold the JobSet after admission)."""
    jobset = {
        "kind": "JobSet",
        "metadata": {
            "name": "pretrain",
            "labels": {names.LABEL_QUEUE_NAME: "lq"},
            "ownerReferences": [
                {
                    "apiVersion": "trainer.kubeflow.org/v1alpha1",
                    "kind": "TrainJob",
                    "name": "pretrain",
                    "controller": True,
                }
            ],
        },
    }
    assert controlled_by(jobset, KINDS) is KINDS["TrainJob"]


def test_the_config_sample_is_queued_on_its_runtime_as_one_rack_of_4_x_8_gpus() -> None:
    kinds = Path(__file__).resolve().parents[3] / "config" / "samples" / "kinds"
    runtime = yaml.safe_load((kinds / "trainjob-runtime.yaml").read_text())
    job = yaml.safe_load((kinds / "trainjob.yaml").read_text())
    assert KIND.is_suspended(job)
    for op in KIND.snapshot_ops(job, runtime):  # what the mutating webhook adds
        job["metadata"].setdefault("annotations", {}).update(op["value"])
    assert KIND.queue_name(job) == "training"
    (node,) = KIND.workload_spec(job)["podSets"]
    assert (node["name"], node["count"]) == ("node", 4)
    assert node["template"]["spec"]["containers"][0]["resources"]["limits"] == {GPU: "8"}
    assert node["topologyRequest"] == {"required": RACK}
