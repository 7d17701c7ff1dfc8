"""An MPIJob through the reconcile loop (`controller_fakes`): one Workload for its launcher and
workers; admitted, its launcher Job (made by mpi-operator while the MPIJob waited, and never
re-rendered by it) is placed before the MPIJob starts; preempted, it is suspended and requeued
once mpi-operator says its pods are gone; admitted again elsewhere, the launcher Job follows."""

from __future__ import annotations

from typing import Any

from controller_fakes import World, merge

from queuectl.api import names
from queuectl.api.views import WorkloadView
from queuectl.controller.watch import kube as k
from queuectl.controller.workloads.reconcile import Reconciler
from queuectl.core import types as core
from queuectl.core.results import Eviction
from queuectl.jobs.mpi import MPI_JOBS
from queuectl.jobs.registry import KINDS, placing_owner
from tests.unit.jobs.jobs_helpers import required
from tests.unit.jobs.test_jobs_mpi import launcher_job, suspended

GPU = names.GPU_RESOURCE


def mpi_world() -> World:
    """The fake cluster with an A100 flavor beside the H100 one, and a reconciler that knows
    every registered kind."""
    w = World()
    w.add(
        k.RESOURCE_FLAVORS,
        {"metadata": {"name": "a100"}, "spec": {"nodeLabels": {names.LABEL_GPU_PRODUCT: "A100"}}},
    )
    w.rec = Reconciler(
        w.kube,  # type: ignore[arg-type]
        w.cache,
        w.feed,
        w.sched,
        KINDS,
        w.rec.writes.events,
        lambda when, key: w.timers.append((when, key)),
        lambda: w.now,
    )
    return w


def mpijob() -> dict[str, Any]:
    job = suspended()
    job["metadata"]["namespace"] = "ns"
    job["metadata"]["labels"][names.LABEL_PRIORITY_CLASS] = "low"
    return job


def admission(flavor: str) -> core.Admission:
    return core.Admission(
        "cq",
        (
            core.PodSetAssignment("launcher", 1, {"cpu": flavor}, {"cpu": 1}),
            core.PodSetAssignment("worker", 2, {GPU: flavor}, {GPU: 16}),
        ),
    )


def products(template: dict[str, Any]) -> list[Any]:
    terms = (required(template["spec"]) or {}).get("nodeSelectorTerms") or []
    return [e["values"] for t in terms for e in t["matchExpressions"] if "gpu" in e["key"]]


async def test_admitted_the_launcher_job_is_placed_before_the_mpijob_starts() -> None:
    w = mpi_world()
    job = w.add(MPI_JOBS, mpijob())
    w.add(k.JOBS, launcher_job(job))
    key = await w.rec.reconcile_job("MPIJob", "ns", "pi")
    assert key is not None
    wl = w.workload()
    assert [ps["name"] for ps in wl["spec"]["podSets"]] == ["launcher", "worker"]

    before = len(w.kube.writes)
    assert await w.decisions().admit(key, admission("h100"))
    running = w.cache.get(MPI_JOBS, "pi", "ns")
    assert running is not None and running["spec"]["runPolicy"]["suspend"] is False
    launcher = w.cache.get(k.JOBS, "pi-launcher", "ns")
    assert launcher is not None
    assert products(launcher["spec"]["template"]) == [["H100"]]
    labels = launcher["spec"]["template"]["metadata"]["labels"]
    assert labels[names.LABEL_WORKLOAD] == wl["metadata"]["name"]
    patches = [(res, name) for op, res, name in w.kube.writes[before:] if op == "patch"]
    assert patches == [("jobs", "pi-launcher"), ("mpijobs", "pi")]  # placed, then started
    launcher_writes = 1

    # Evicted: suspended; once mpi-operator reports its pods gone, quota is released.
    await w.decisions().apply_eviction(Eviction(key, names.REASON_EVICTED_PREEMPTION, "test"))
    stopped = w.cache.get(MPI_JOBS, "pi", "ns")
    assert stopped is not None and stopped["spec"]["runPolicy"]["suspend"] is True
    assert WorkloadView(w.workload()).holds_quota
    status = {
        "replicaStatuses": {"Launcher": {"active": 0}, "Worker": {"active": 0}},
        "conditions": [{"type": "Suspended", "status": "True"}],
    }
    w.add(MPI_JOBS, merge(stopped, {"status": status}))
    await w.rec.reconcile(key)
    assert not WorkloadView(w.workload()).holds_quota and w.sched.requeued == [key]

    # Admitted again on the A100 flavor: the launcher Job is moved there, not kept on H100.
    assert await w.decisions().admit(key, admission("a100"))
    launcher = w.cache.get(k.JOBS, "pi-launcher", "ns")
    assert launcher is not None and products(launcher["spec"]["template"]) == [["A100"]]
    again = [(r, n) for op, r, n in w.kube.writes if op == "patch"].count(("jobs", "pi-launcher"))
    assert again == launcher_writes + 1


async def test_a_launcher_job_not_made_yet_is_left_to_the_operator() -> None:
    """No launcher Job yet (mpi-operator was down): it is made after the start, from the
    placed template; nothing else is touched, and a Job another MPIJob controls never is."""
    w = mpi_world()
    job = w.add(MPI_JOBS, mpijob())
    key = await w.rec.reconcile_job("MPIJob", "ns", "pi")
    assert key is not None
    assert await w.decisions().admit(key, admission("h100"))
    assert [n for op, r, n in w.kube.writes if op == "patch" and r == "jobs"] == []
    running = w.cache.get(MPI_JOBS, "pi", "ns")
    assert running is not None and running["spec"]["runPolicy"]["suspend"] is False
    assert products(running["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]) == [["H100"]]

    w2 = mpi_world()
    job = w2.add(MPI_JOBS, mpijob())
    w2.add(k.JOBS, launcher_job(job, uid="another-mpijob"))
    key = await w2.rec.reconcile_job("MPIJob", "ns", "pi")
    assert key is not None and await w2.decisions().admit(key, admission("h100"))
    assert [n for op, r, n in w2.kube.writes if op == "patch" and r == "jobs"] == []


async def test_a_launcher_job_made_a_moment_before_the_admission_is_read_and_placed() -> None:
    """mpi-operator made the launcher Job just before the admission, and the controller's cache
    has not seen it yet: it is read from the API server and placed before the MPIJob starts
    (left to the cache, its pod would start without the placement and never be scheduled)."""
    w = mpi_world()
    job = w.add(MPI_JOBS, mpijob())
    key = await w.rec.reconcile_job("MPIJob", "ns", "pi")
    assert key is not None
    w.kube.put(k.JOBS, launcher_job(job))  # in the API server, not yet in the cache
    before = len(w.kube.writes)
    assert await w.decisions().admit(key, admission("h100"))
    patches = [(res, name) for op, res, name in w.kube.writes[before:] if op == "patch"]
    assert patches == [("jobs", "pi-launcher"), ("mpijobs", "pi")]
    launcher = await w.kube.get(k.JOBS, "pi-launcher", "ns")
    assert products(launcher["spec"]["template"]) == [["H100"]]


async def test_a_launcher_job_made_unplaced_after_the_start_is_placed_while_suspended() -> None:
    """mpi-operator made the launcher Job from the MPIJob it saw before the start (its own
    cache lagged): the launcher's event brings the MPIJob back, and the launcher, still
    suspended, is placed."""
    w = mpi_world()
    job = w.add(MPI_JOBS, mpijob())
    key = await w.rec.reconcile_job("MPIJob", "ns", "pi")
    assert key is not None and await w.decisions().admit(key, admission("h100"))
    w.add(k.JOBS, launcher_job(job))
    assert await w.rec.reconcile_job("MPIJob", "ns", "pi") == key
    await w.rec.reconcile(key)
    launcher = w.cache.get(k.JOBS, "pi-launcher", "ns")
    assert launcher is not None and products(launcher["spec"]["template"]) == [["H100"]]
    assert ("delete", "jobs", "pi-launcher") not in w.kube.writes
    writes = len(w.kube.writes)
    await w.rec.reconcile(key)  # placed: nothing more to write
    assert [wr for wr in w.kube.writes[writes:] if wr[1] == "jobs"] == []


async def test_a_launcher_job_that_started_unplaced_gets_its_mpijob_requeued() -> None:
    """The launcher Job was already unsuspended by mpi-operator, unplaced: its template is
    frozen (the API server refuses the patch). The MPIJob is evicted and suspended (mpi-operator
    then suspends the launcher), to be requeued at its position and start placed; the
    controller deletes no Job."""
    w = mpi_world()
    job = w.add(MPI_JOBS, mpijob())
    key = await w.rec.reconcile_job("MPIJob", "ns", "pi")
    assert key is not None and await w.decisions().admit(key, admission("h100"))
    started = launcher_job(job)
    started["spec"]["suspend"] = False
    w.add(k.JOBS, started)
    patch = w.kube.patch

    async def frozen_template(res: Any, name: str, body: Any, *args: Any, **kw: Any) -> Any:
        if res == k.JOBS:
            raise k.KubeError(422, "Invalid", "spec.template: field is immutable")
        return await patch(res, name, body, *args, **kw)

    w.kube.patch = frozen_template  # type: ignore[method-assign,assignment]
    await w.rec.reconcile(key)
    evicted = WorkloadView(w.workload()).condition(names.COND_EVICTED) or {}
    assert evicted.get("reason") == names.REASON_EVICTED_CHILD_UNPLACED, evicted
    assert "Job pi-launcher started without the placement" in evicted["message"]
    stopped = w.cache.get(MPI_JOBS, "pi", "ns")
    assert stopped is not None and stopped["spec"]["runPolicy"]["suspend"] is True
    assert [op for op, res, _ in w.kube.writes if res == "jobs" and op == "delete"] == []


def test_a_launcher_jobs_events_name_the_mpijob_that_places_it() -> None:
    job = mpijob()
    job["metadata"]["uid"] = "mpi-uid"
    assert placing_owner(launcher_job(job), KINDS) == ("MPIJob", "pi")
    jobset_child = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": "js-workers-0",
            "ownerReferences": [
                {
                    "apiVersion": "jobset.x-k8s.io/v1alpha2",
                    "kind": "JobSet",
                    "name": "js",
                    "uid": "u",
                    "controller": True,
                }
            ],
        },
    }
    assert placing_owner(jobset_child, KINDS) is None  # a JobSet's operator places its Jobs
    assert placing_owner({"kind": "Job", "metadata": {"name": "alone"}}, KINDS) is None
