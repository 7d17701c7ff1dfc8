"""RayCluster and RayJob as KubeRay v1.5.0 runs them: the head and each worker group (and a
RayJob's submitter) are pod sets of the counts KubeRay creates; spec.suspend holds them; the
placement reaches every template, the worker groups' inside their list; restore undoes it."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from queuectl.api import names
from queuectl.jobs import PodSetPlacement
from queuectl.jobs.ray import RayCluster, RayJob
from queuectl.jobs.ray.clusterspec import worker_count
from queuectl.jobs.shape import shape_changes
from tests.unit.jobs.jobs_helpers import AFFINITY, apply_merge, required

SAMPLES = Path(__file__).parent / "samples"
GPU = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}


def sample(name: str) -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load((SAMPLES / name).read_text())
    return loaded


def recorded(kind: RayCluster | RayJob, job: dict[str, Any]) -> list[dict[str, Any]]:
    pod_sets: list[dict[str, Any]] = kind.workload_spec(job)["podSets"]
    return pod_sets


def place(name: str, rack: str) -> PodSetPlacement:
    return PodSetPlacement(
        name,
        node_labels={names.LABEL_GPU_PRODUCT: "H100"},
        tolerations=(GPU,),
        domain={names.LABEL_TOPOLOGY_RACK: (rack,)},
    )


def test_a_raycluster_is_a_head_and_one_pod_set_per_worker_group() -> None:
    sets = RayCluster().pod_sets(sample("raycluster.yaml"))
    assert [(s.name, s.count) for s in sets] == [("head", 1), ("gpu-group", 4), ("cpu-group", 1)]
    spec = RayCluster().workload_spec(sample("raycluster.yaml"))
    assert spec["queueName"] == "lq"
    assert spec["podSets"][1]["topologyRequest"] == {"required": names.LABEL_TOPOLOGY_RACK}


@pytest.mark.parametrize(
    ("group", "autoscaling", "pods"),
    [
        ({"replicas": 2, "minReplicas": 1, "maxReplicas": 4}, False, 2),
        ({"replicas": 0, "minReplicas": 3, "maxReplicas": 4}, False, 3),  # held at min
        ({"replicas": 9, "minReplicas": 1, "maxReplicas": 4}, False, 4),  # held at max
        ({"minReplicas": 2, "maxReplicas": 4}, False, 2),  # replicas unset: min
        ({"replicas": 2, "minReplicas": 1, "maxReplicas": 4, "numOfHosts": 4}, False, 8),
        ({"replicas": 2, "minReplicas": 1, "maxReplicas": 4}, True, 4),  # autoscaling: max
        ({"replicas": 2, "minReplicas": 1, "maxReplicas": 4, "suspend": True}, False, 0),
    ],
)
def test_a_worker_group_counts_the_pods_kuberay_would_run(
    group: dict[str, Any], autoscaling: bool, pods: int
) -> None:
    assert worker_count({"enableInTreeAutoscaling": autoscaling}, group)[0] == pods


def test_autoscaling_within_the_admitted_size_is_no_shape_change_and_raising_it_is() -> None:
    kind = RayCluster()
    old = sample("raycluster.yaml")
    old["spec"]["enableInTreeAutoscaling"] = True
    scaled = copy.deepcopy(old)
    scaled["spec"]["workerGroupSpecs"][0]["replicas"] = 4  # the autoscaler, up to maxReplicas
    assert shape_changes(kind, old, scaled) == []
    raised = copy.deepcopy(old)
    raised["spec"]["workerGroupSpecs"][0]["maxReplicas"] = 8
    assert shape_changes(kind, old, raised) == [
        "pod set 'gpu-group': the pods it runs at once (maxReplicas x numOfHosts (autoscaling)) "
        "from 8 to 16"
    ]
    fixed = sample("raycluster.yaml")
    more = copy.deepcopy(fixed)
    more["spec"]["workerGroupSpecs"][1]["replicas"] = 3  # no autoscaler: a scale-up by hand
    assert shape_changes(kind, fixed, more)


def test_a_raycluster_made_by_a_rayjob_is_not_queued_on_its_own() -> None:
    cluster = sample("raycluster.yaml")
    assert RayCluster().queue_name(cluster) == "lq"
    cluster["metadata"]["ownerReferences"] = [
        {"apiVersion": "ray.io/v1", "kind": "RayJob", "name": "x", "uid": "u", "controller": True}
    ]
    assert RayCluster().queue_name(cluster) is None


def test_raycluster_suspend_and_its_pods_gone_from_the_suspended_condition() -> None:
    kind, job = RayCluster(), sample("raycluster.yaml")
    assert not kind.is_suspended(job)
    assert kind.suspend_ops(job) == [{"op": "add", "path": "/spec/suspend", "value": True}]
    assert kind.suspend_patch(job) == {"spec": {"suspend": True}}
    job["spec"]["suspend"] = True
    assert kind.suspend_ops(job) == []
    job["metadata"]["generation"] = 3
    suspended = {"type": "RayClusterSuspended", "status": "True"}
    job["status"] = {"observedGeneration": 2, "conditions": [suspended]}
    assert not kind.pods_gone(job)  # that status predates the suspend
    job["status"]["observedGeneration"] = 3
    assert kind.pods_gone(job)
    assert kind.finished(job) is None


def test_raycluster_placement_reaches_head_and_every_worker_template_and_restore_undoes_it() -> (
    None
):
    kind, job = RayCluster(), sample("raycluster.yaml")
    job["spec"]["suspend"] = True
    pod_sets = recorded(kind, job)
    placements = [place("head", "r1"), place("gpu-group", "r1"), place("cpu-group", "r1")]
    patch = kind.run_patch(job, pod_sets, placements)
    running = apply_merge(job, patch)
    assert running["spec"]["suspend"] is False
    templates = [running["spec"]["headGroupSpec"]["template"]] + [
        g["template"] for g in running["spec"]["workerGroupSpecs"]
    ]
    for template in templates:
        terms = template["spec"]["affinity"]["nodeAffinity"][AFFINITY]["nodeSelectorTerms"]
        assert {"key": names.LABEL_TOPOLOGY_RACK, "operator": "In", "values": ["r1"]} in terms[0][
            "matchExpressions"
        ]
        assert template["spec"]["tolerations"].count(GPU) == 1  # the user's own one is kept once
        assert template["metadata"]["labels"][names.LABEL_WORKLOAD] == kind.workload_name(job)
    # the rest of each group is kept as it was
    assert running["spec"]["workerGroupSpecs"][0]["replicas"] == 2
    assert kind.run_patch(running, pod_sets, placements) == patch  # computed over the originals
    running["spec"]["suspend"] = True
    restored = apply_merge(running, kind.restore_patch(running, pod_sets))
    head = restored["spec"]["headGroupSpec"]["template"]["spec"]
    assert required(head) is None and "tolerations" not in head
    for was, now in zip(
        job["spec"]["workerGroupSpecs"], restored["spec"]["workerGroupSpecs"], strict=True
    ):
        assert now["template"]["spec"] == was["template"]["spec"]
    assert kind.restore_patch(restored, pod_sets) is None


def test_a_rayjob_is_its_cluster_and_its_submitter_admitted_as_one() -> None:
    kind, job = RayJob(), sample("rayjob.yaml")
    sets = kind.pod_sets(job)
    assert [(s.name, s.count) for s in sets] == [("head", 1), ("small-group", 3), ("submitter", 1)]
    submitter = sets[2].template["spec"]["containers"][0]
    assert submitter["image"] == "rayproject/ray:2.46.0"
    assert submitter["resources"]["requests"] == {"cpu": "500m", "memory": "200Mi"}
    job["spec"]["submissionMode"] = "HTTPMode"
    assert [s.name for s in kind.pod_sets(job)] == ["head", "small-group"]
    assert kind.pod_priority_class(job) == "high"


def test_rayjob_placement_reaches_the_cluster_and_the_submitter_it_writes_out() -> None:
    kind, job = RayJob(), sample("rayjob.yaml")
    job["spec"]["suspend"] = True
    pod_sets = recorded(kind, job)
    placements = [place(n, "r2") for n in ("head", "small-group", "submitter")]
    running = apply_merge(job, kind.run_patch(job, pod_sets, placements))
    assert running["spec"]["suspend"] is False
    cluster = running["spec"]["rayClusterSpec"]
    sub = running["spec"]["submitterPodTemplate"]
    for template in (
        cluster["headGroupSpec"]["template"],
        cluster["workerGroupSpecs"][0]["template"],
        sub,
    ):
        assert template["spec"]["affinity"]["nodeAffinity"][AFFINITY]
        assert template["metadata"]["labels"][names.LABEL_WORKLOAD] == kind.workload_name(job)
    assert sub["spec"]["containers"][0]["name"] == "ray-job-submitter"
    assert kind.pod_sets(running)[2].count == 1
    assert shape_changes(kind, job, running) == []  # placing it is no change of its shape
    running["spec"]["suspend"] = True
    restored = apply_merge(running, kind.restore_patch(running, pod_sets))
    assert required(restored["spec"]["submitterPodTemplate"]["spec"]) is None
    assert kind.restore_patch(restored, pod_sets) is None


@pytest.mark.parametrize(
    ("status", "gone", "finished"),
    [
        ({}, True, None),
        ({"jobDeploymentStatus": "Initializing"}, False, None),
        ({"jobDeploymentStatus": "Running"}, False, None),
        ({"jobDeploymentStatus": "Suspending"}, False, None),
        ({"jobDeploymentStatus": "Suspended"}, True, None),
        ({"jobDeploymentStatus": "Complete", "jobStatus": "SUCCEEDED"}, False, True),
        ({"jobDeploymentStatus": "Complete", "jobStatus": "STOPPED"}, False, False),
        ({"jobDeploymentStatus": "Failed", "reason": "DeadlineExceeded"}, False, False),
        ({"jobDeploymentStatus": "ValidationFailed", "message": "bad"}, True, False),
    ],
)
def test_rayjob_status_as_kuberay_reports_it(
    status: dict[str, Any], gone: bool, finished: bool | None
) -> None:
    job = {**sample("rayjob.yaml"), "status": status}
    assert RayJob().pods_gone(job) is gone
    fin = RayJob().finished(job)
    assert (fin.succeeded if fin else None) is finished
