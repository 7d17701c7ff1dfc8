"""The webhooks on an MPIJob, as on every kind: a queued MPIJob is created suspended (through
spec.runPolicy.suspend) and labelled with its ClusterQueue; while admitted its shape, placement
and runPolicy.managedBy are frozen, while it waits they may change. The launcher Job
mpi-operator makes is part of the MPIJob's Workload: never queued on its own (even in a
namespace with a default LocalQueue), held to the launcher template, and not started while the
MPIJob waits."""

from __future__ import annotations

import copy
from typing import Any

from queuectl.api import names
from queuectl.webhooks.jobs import mutate_job, validate_job
from queuectl.webhooks.lookup import InMemoryLookup
from queuectl.webhooks.review import decode_patch
from tests.unit.jobs.test_jobs_mpi import launcher_job, sample
from tests.unit.webhooks.webhook_cases import apply_patch, request

NS = "team-a"
MPIJOB_KIND = {"group": "kubeflow.org", "version": "v2beta1", "kind": "MPIJob"}
JOB_KIND = {"group": "batch", "version": "v1", "kind": "Job"}
MPI_OPERATOR = "system:serviceaccount:mpi-operator:mpi-operator"


def lookup(*owners: dict[str, Any], admitted: bool = False) -> InMemoryLookup:
    objects = {("mpijobs", NS, o["metadata"]["name"]): o for o in owners}
    return InMemoryLookup(
        local_queues={(NS, "lq"): "cq-a", (NS, "default"): "cq-default"},
        owners=objects,
        inputs=objects,
        admitted_jobs={(NS, o["metadata"]["name"]) for o in owners} if admitted else set(),
    )


def with_suspend(job: dict[str, Any], suspend: bool) -> dict[str, Any]:
    out = copy.deepcopy(job)
    out["spec"]["runPolicy"]["suspend"] = suspend
    return out


def test_a_queued_mpijob_is_created_suspended_and_labelled_with_its_cluster_queue() -> None:
    job = sample()
    answer = mutate_job(request(job, kind=MPIJOB_KIND), lookup())
    assert answer["allowed"] is True
    created = apply_patch(job, decode_patch(answer))
    assert created["spec"]["runPolicy"]["suspend"] is True
    assert created["spec"]["runPolicy"]["cleanPodPolicy"] == "Running"
    assert created["metadata"]["labels"][names.LABEL_CLUSTER_QUEUE] == "cq-a"


def test_an_admitted_mpijob_may_not_grow_move_or_change_hands() -> None:
    running = with_suspend(sample(), False)
    edits = {
        "(mpiReplicaSpecs.Worker.replicas) from 2 to 8": lambda j: j["spec"]["mpiReplicaSpecs"][
            "Worker"
        ].update(replicas=8),
        "spec.mpiReplicaSpecs.Worker.template.spec.nodeSelector": lambda j: j["spec"][
            "mpiReplicaSpecs"
        ]["Worker"]["template"]["spec"].update(nodeSelector={"gpu": "h100"}),
        "spec.runPolicy.managedBy": lambda j: j["spec"]["runPolicy"].update(
            managedBy="kueue.x-k8s.io/multikueue"
        ),
    }
    for said, edit in edits.items():
        new = copy.deepcopy(running)
        edit(new)
        answer = validate_job(
            request(new, running, kind=MPIJOB_KIND), lookup(running, admitted=True)
        )
        assert answer["allowed"] is False, said
        message = answer["status"]["message"]
        assert said in message and f"MPIJob {NS}/pi" in message, message
        waiting = with_suspend(running, True)
        new_waiting = with_suspend(new, True)
        assert validate_job(request(new_waiting, waiting, kind=MPIJOB_KIND), lookup(waiting))[
            "allowed"
        ], f"{said}: a waiting MPIJob may still change"


def test_its_launcher_job_is_part_of_its_workload_not_a_job_of_its_own() -> None:
    job = with_suspend(sample(), True)
    child = launcher_job(job)
    world = lookup(job)
    made = mutate_job(request(child, kind=JOB_KIND, user=MPI_OPERATOR), world)
    assert made["allowed"] is True and not decode_patch(made), "not queued on the default queue"
    create = request(child, kind=JOB_KIND, user=MPI_OPERATOR)
    assert validate_job(create, world, children_only=True)["allowed"] is True

    started = copy.deepcopy(child)
    started["spec"]["suspend"] = False
    answer = validate_job(request(started, child, kind=JOB_KIND, user="alice"), world)
    assert answer["allowed"] is False
    assert "cannot run while its MPIJob 'pi' is suspended" in answer["status"]["message"]

    scaled = copy.deepcopy(child)
    scaled["spec"]["parallelism"] = 5
    answer = validate_job(request(scaled, child, kind=JOB_KIND, user="alice"), world)
    assert answer["allowed"] is False
    assert "(pods at once)" in answer["status"]["message"], answer["status"]["message"]


def test_mpi_operator_resuming_the_placed_launcher_job_passes() -> None:
    """The controller placed the launcher Job (exempt), then started the MPIJob; mpi-operator
    unsuspends the Job, changing nothing else."""
    job = with_suspend(sample(), False)
    child = launcher_job(job)
    world = lookup(job, admitted=True)
    resumed = copy.deepcopy(child)
    resumed["spec"]["suspend"] = False
    answer = validate_job(request(resumed, child, kind=JOB_KIND, user=MPI_OPERATOR), world)
    assert answer["allowed"] is True, answer.get("status")
