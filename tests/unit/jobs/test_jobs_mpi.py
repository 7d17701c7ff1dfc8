"""MPIJob as mpi-operator v0.6.0 runs it: the launcher and the workers are pod sets of one gang
(one Workload); spec.runPolicy.suspend holds it; placement reaches both templates and restore
undoes it; who runs it (runPolicy.managedBy) is frozen while admitted; status read from its
conditions. The launcher runs in a batch Job mpi-operator makes while the MPIJob waits and never
re-renders: that child is paired with the launcher pod set and placed by the controller."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from queuectl.api import names
from queuectl.jobs import PlacesChildren, PodSetPlacement
from queuectl.jobs.frozen import frozen, placement_changes
from queuectl.jobs.kind import FreezesFields, MakesChildren
from queuectl.jobs.mpi import MPIJob
from queuectl.jobs.mpi.kind import launcher_job_name
from queuectl.jobs.registry import KINDS
from tests.unit.jobs.jobs_helpers import AFFINITY, apply_merge, required

SAMPLE = Path(__file__).parent / "samples" / "mpijob.yaml"
H100 = {names.LABEL_GPU_PRODUCT: "H100"}
A100 = {names.LABEL_GPU_PRODUCT: "A100"}


def sample() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load(SAMPLE.read_text())
    return loaded


def suspended() -> dict[str, Any]:
    job = sample()
    job["spec"]["runPolicy"]["suspend"] = True
    return job


def launcher_job(mpijob: dict[str, Any], uid: str | None = None) -> dict[str, Any]:
    """The Job mpi-operator v0.6.0 makes at its first sync (newLauncherJob): the launcher
    template with its own labels, env and volume added, suspended with the MPIJob."""
    template = copy.deepcopy(mpijob["spec"]["mpiReplicaSpecs"]["Launcher"]["template"])
    template.setdefault("metadata", {})["labels"] = {
        "training.kubeflow.org/job-name": mpijob["metadata"]["name"],
        "training.kubeflow.org/job-role": "launcher",
    }
    template["spec"]["hostname"] = launcher_job_name(mpijob)
    template["spec"]["containers"][0]["env"] = [{"name": "OMPI_MCA_orte_keep_fqdn_hostnames"}]
    meta = mpijob["metadata"]
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": launcher_job_name(mpijob),
            "namespace": meta["namespace"],
            "uid": "launcher-uid",
            "ownerReferences": [
                {
                    "apiVersion": "kubeflow.org/v2beta1",
                    "kind": "MPIJob",
                    "name": meta["name"],
                    "uid": meta["uid"] if uid is None else uid,
                    "controller": True,
                }
            ],
        },
        "spec": {"suspend": True, "template": template},
    }


def test_the_launcher_and_the_workers_are_pod_sets_of_one_workload() -> None:
    kind = KINDS["MPIJob"]
    assert isinstance(kind, MPIJob)
    job = sample()
    assert [(s.name, s.count) for s in kind.pod_sets(job)] == [("launcher", 1), ("worker", 2)]
    spec = kind.workload_spec(job)
    assert [ps["name"] for ps in spec["podSets"]] == ["launcher", "worker"]
    assert spec["queueName"] == "lq"
    assert kind.workload_name(job).startswith("mpijob-pi-")
    assert [ps.path for ps in kind.pod_sets(job)] == [
        "spec.mpiReplicaSpecs.Launcher.template",
        "spec.mpiReplicaSpecs.Worker.template",
    ]


def test_counts_default_as_mpi_operator_defaults_them() -> None:
    """A launcher without replicas runs one; a worker spec without replicas runs none."""
    job = sample()
    specs = job["spec"]["mpiReplicaSpecs"]
    del specs["Launcher"]["replicas"], specs["Worker"]["replicas"]
    assert [(s.name, s.count) for s in MPIJob().pod_sets(job)] == [("launcher", 1), ("worker", 0)]
    del specs["Worker"]
    assert [(s.name, s.count) for s in MPIJob().pod_sets(job)] == [("launcher", 1)]


@pytest.mark.parametrize(
    ("spec", "ops"),
    [
        (
            {"mpiReplicaSpecs": {}},
            [{"op": "add", "path": "/spec/runPolicy", "value": {"suspend": True}}],
        ),
        (
            {"runPolicy": {"cleanPodPolicy": "Running"}},
            [{"op": "add", "path": "/spec/runPolicy/suspend", "value": True}],
        ),
        ({"runPolicy": {"suspend": True}}, []),
    ],
)
def test_it_is_created_suspended_through_run_policy(spec: dict[str, Any], ops: list[Any]) -> None:
    kind = MPIJob()
    assert kind.suspend_ops({"spec": spec}) == ops
    assert kind.suspend_field == "spec.runPolicy.suspend"
    assert kind.suspend_patch({}) == {"spec": {"runPolicy": {"suspend": True}}}
    assert kind.is_suspended({"spec": {"runPolicy": {"suspend": True}}})


def test_placement_reaches_launcher_and_workers_and_restore_undoes_it() -> None:
    kind, job = MPIJob(), suspended()
    pod_sets = kind.workload_spec(job)["podSets"]
    placements = [PodSetPlacement(n, node_labels=H100) for n in ("launcher", "worker")]
    running = apply_merge(job, kind.run_patch(job, pod_sets, placements))
    assert not kind.is_suspended(running)
    specs = running["spec"]["mpiReplicaSpecs"]
    product = {"key": names.LABEL_GPU_PRODUCT, "operator": "In", "values": ["H100"]}
    launcher = specs["Launcher"]["template"]
    assert required(launcher["spec"])["nodeSelectorTerms"] == [{"matchExpressions": [product]}]
    assert required(specs["Worker"]["template"]["spec"])["nodeSelectorTerms"] == [
        {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}, product]}
    ]
    for rtype in ("Launcher", "Worker"):
        labels = specs[rtype]["template"]["metadata"]["labels"]
        assert labels[names.LABEL_WORKLOAD] == kind.workload_name(job)
    running["spec"]["runPolicy"]["suspend"] = True
    restored = apply_merge(running, kind.restore_patch(running, pod_sets))
    for rtype in ("Launcher", "Worker"):
        now = restored["spec"]["mpiReplicaSpecs"][rtype]["template"]["spec"]
        was = job["spec"]["mpiReplicaSpecs"][rtype]["template"]["spec"]
        assert required(now) == required(was) and now.get("tolerations") == was.get("tolerations")
    assert kind.restore_patch(restored, pod_sets) is None
    assert kind.can_restore(restored) and not kind.can_restore(running | {"spec": {}})


@pytest.mark.parametrize(
    ("status", "gone", "finished"),
    [
        ({}, True, None),
        ({"replicaStatuses": {"Launcher": {"active": 1}, "Worker": {"active": 2}}}, False, None),
        (  # workers deleted and said so; the launcher's Job still has its running pod
            {
                "replicaStatuses": {"Launcher": {"active": 1}, "Worker": {}},
                "conditions": [{"type": "Suspended", "status": "True"}],
            },
            False,
            None,
        ),
        (
            {
                "replicaStatuses": {"Launcher": {}, "Worker": {}},
                "conditions": [{"type": "Suspended", "status": "True"}],
            },
            True,
            None,
        ),
        ({"conditions": [{"type": "Succeeded", "status": "True"}]}, True, True),
        (
            {"conditions": [{"type": "Failed", "status": "True", "reason": "MPIJobEvicted"}]},
            True,
            False,
        ),
        ({"conditions": [{"type": "Running", "status": "True"}]}, True, None),
    ],
)
def test_status_as_mpi_operator_reports_it(
    status: dict[str, Any], gone: bool, finished: bool | None
) -> None:
    job = {**sample(), "status": status}
    assert MPIJob().pods_gone(job) is gone
    fin = MPIJob().finished(job)
    assert (fin.succeeded if fin else None) is finished


def test_handing_it_to_another_controller_while_admitted_is_a_frozen_change() -> None:
    """With another runPolicy.managedBy, mpi-operator ignores the MPIJob: a suspend would no
    longer stop its pods. The webhook refuses the change while it is admitted (frozen.py)."""
    kind = MPIJob()
    assert isinstance(kind, FreezesFields)
    job = sample()
    moved = copy.deepcopy(job)
    moved["spec"]["runPolicy"]["managedBy"] = "kueue.x-k8s.io/multikueue"
    assert frozen(kind, job) != frozen(kind, moved)
    assert placement_changes(kind, job, moved) == ["spec.runPolicy.managedBy"]
    slots = copy.deepcopy(job)
    slots["spec"]["slotsPerWorker"] = 1  # ranks per worker: no pod changes
    assert frozen(kind, job) == frozen(kind, slots)


def test_the_launcher_job_is_its_child_made_from_the_launcher_template() -> None:
    kind, job = MPIJob(), suspended()
    assert isinstance(kind, MakesChildren)
    child = launcher_job(job)
    ((made, owner),) = kind.child_pod_sets(job, child) or []
    assert (made.name, owner.name, made.count, owner.count) == ("main", "launcher", 1, 1)
    assert kind.child_pod_sets(job, child | {"metadata": {"name": "pi-worker-0"}}) is None
    assert kind.child_pod_sets(job, {**child, "kind": "JobSet"}) is None


def test_the_launcher_job_made_while_waiting_gets_each_admissions_placement() -> None:
    """mpi-operator made `pi-launcher` at once, suspended, from the unplaced template, and on
    resume only unsuspends it: the controller places it. A second admission on another
    flavor replaces the first's placement (never both: no node has both products)."""
    kind, job = MPIJob(), suspended()
    assert isinstance(kind, PlacesChildren)
    assert kind.placed_children(job) == ((KINDS["Job"].resource, "pi-launcher"),)
    pod_sets = kind.workload_spec(job)["podSets"]
    child = launcher_job(job)
    toleration = {"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}
    first = [PodSetPlacement("launcher", node_labels=H100, tolerations=(toleration,))]
    placed = apply_merge(child, kind.child_run_patch(job, child, pod_sets, first))
    template = placed["spec"]["template"]
    assert required(template["spec"])["nodeSelectorTerms"] == [
        {
            "matchExpressions": [
                {"key": names.LABEL_GPU_PRODUCT, "operator": "In", "values": ["H100"]}
            ]
        }
    ]
    assert template["spec"]["tolerations"] == [toleration]
    assert template["metadata"]["labels"][names.LABEL_WORKLOAD] == kind.workload_name(job)
    assert template["metadata"]["labels"]["training.kubeflow.org/job-role"] == "launcher"
    assert template["spec"]["containers"] == child["spec"]["template"]["spec"]["containers"]
    assert kind.child_run_patch(job, placed, pod_sets, first) is None  # placed: nothing to do

    second = [PodSetPlacement("launcher", node_labels=A100)]
    again = apply_merge(placed, kind.child_run_patch(job, placed, pod_sets, second))
    terms = again["spec"]["template"]["spec"]["affinity"]["nodeAffinity"][AFFINITY]
    assert terms["nodeSelectorTerms"] == [
        {
            "matchExpressions": [
                {"key": names.LABEL_GPU_PRODUCT, "operator": "In", "values": ["A100"]}
            ]
        }
    ]
    assert not again["spec"]["template"]["spec"].get("tolerations")


def test_a_job_another_mpijob_controls_is_never_placed() -> None:
    kind, job = MPIJob(), suspended()
    pod_sets = kind.workload_spec(job)["podSets"]
    other = launcher_job(job, uid="someone-else")
    placements = [PodSetPlacement("launcher", node_labels=H100)]
    assert kind.child_run_patch(job, other, pod_sets, placements) is None
    del job["spec"]["mpiReplicaSpecs"]["Launcher"]
    assert kind.placed_children(job) == ()
