"""Ownership is verified, not claimed; a child is as frozen as its owner.

An object whose controller ownerReference names a registered kind (a JobSet's Job, a RayJob's
RayCluster, a TrainJob's JobSet) is part of its owner's Workload only when that owner exists
with that uid, makes such objects and is queued; any other claim is no owner, and the object
is queued on its own. A verified child must run what its owner says: scaling a JobSet's Job
from 4 pods to 100, or a RayJob's RayCluster from 3 workers to 50, is refused naming the field,
while the operators' own writes (JobSet copying its template's nodeSelector on resume, KubeRay
making the RayCluster) agree with the owner and pass.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from queuectl.api import names
from queuectl.jobs.ray.rayjob import default_submitter
from queuectl.jobs.trainjob import TrainJob
from queuectl.webhooks.jobs import mutate_job, read_inputs, validate_job
from queuectl.webhooks.lookup import InMemoryLookup
from queuectl.webhooks.review import decode_patch
from tests.unit.jobs.trainjob_cases import created
from tests.unit.webhooks.webhook_cases import apply_patch, request

SAMPLES = Path(__file__).resolve().parents[1] / "jobs" / "samples"
NS = "team-a"
ALICE = "alice"
JOBSET_OPERATOR = "system:serviceaccount:jobset-system:jobset-controller-manager"
KUBERAY = "system:serviceaccount:ray-system:kuberay-operator"
A100 = {"gpu.example.com/model": "a100"}
H100 = {"gpu.example.com/model": "h100"}
JOB_KIND = {"group": "batch", "version": "v1", "kind": "Job"}
JOBSET_KIND = {"group": "jobset.x-k8s.io", "version": "v1alpha2", "kind": "JobSet"}
RAYCLUSTER_KIND = {"group": "ray.io", "version": "v1", "kind": "RayCluster"}


def sample(name: str) -> dict[str, Any]:
    doc: dict[str, Any] = yaml.safe_load((SAMPLES / name).read_text())
    return doc


def ref_to(owner: dict[str, Any], uid: str | None = None) -> dict[str, Any]:
    meta = owner["metadata"]
    return {
        "apiVersion": owner["apiVersion"],
        "kind": owner["kind"],
        "name": meta["name"],
        "uid": meta["uid"] if uid is None else uid,
        "controller": True,
    }


def running(owner: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(owner)
    out["spec"]["suspend"] = False
    return out


# --- the owners, admitted on the A100 flavor, and the children their operators make ----------
def jobset() -> dict[str, Any]:
    """driver-workers, its workers placed on the A100 nodes (queuectl's nodeSelector)."""
    js = running(sample("jobset-driver-workers.yaml"))
    workers = js["spec"]["replicatedJobs"][1]["template"]["spec"]["template"]["spec"]
    workers["nodeSelector"] = {**workers["nodeSelector"], **A100}
    return js


def jobset_job(js: dict[str, Any], rjob: int = 1, index: int = 0) -> dict[str, Any]:
    """The Job the JobSet controller makes: `<jobset>-<replicated job>-<index>`."""
    spec = js["spec"]["replicatedJobs"][rjob]
    name = f"{js['metadata']['name']}-{spec['name']}-{index}"
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": NS, "ownerReferences": [ref_to(js)]},
        "spec": copy.deepcopy(spec["template"]["spec"]),
    }


def rayjob() -> dict[str, Any]:
    job = running(sample("rayjob.yaml"))
    job["status"] = {"rayClusterName": "rayjob-sample-x7k2p"}
    return job


def rayjob_cluster(job: dict[str, Any]) -> dict[str, Any]:
    """The RayCluster KubeRay makes from spec.rayClusterSpec."""
    return {
        "apiVersion": "ray.io/v1",
        "kind": "RayCluster",
        "metadata": {
            "name": job["status"]["rayClusterName"],
            "namespace": NS,
            "labels": dict(job["metadata"]["labels"]),
            "ownerReferences": [ref_to(job)],
        },
        "spec": copy.deepcopy(job["spec"]["rayClusterSpec"]),
    }


def rayjob_submitter(job: dict[str, Any]) -> dict[str, Any]:
    """The submitter Job KubeRay makes in K8sJobMode, named as the RayJob."""
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": job["metadata"]["name"],
            "namespace": NS,
            "ownerReferences": [ref_to(job)],
        },
        "spec": {"template": default_submitter(job["spec"]["rayClusterSpec"])},
    }


def trainjob() -> dict[str, Any]:
    job = running(created())
    job["apiVersion"] = "trainer.kubeflow.org/v1alpha1"
    return job


def trainjob_jobset(job: dict[str, Any]) -> dict[str, Any]:
    """The JobSet trainer makes: the runtime's replicated jobs, the TrainJob's numNodes and
    resourcesPerNode, its overrides merged in."""
    rjobs = [
        {
            "name": ps.name,
            "replicas": 1,
            "template": {
                "spec": {"parallelism": ps.count, "completions": ps.count, "template": ps.template}
            },
        }
        for ps in TrainJob().pod_sets(job)
    ]
    return {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {
            "name": job["metadata"]["name"],
            "namespace": NS,
            "uid": "uid-trainjob-jobset",
            "ownerReferences": [ref_to(job)],
        },
        "spec": {"suspend": False, "replicatedJobs": copy.deepcopy(rjobs)},
    }


def world(*owners: dict[str, Any], default_queue: bool = True) -> InMemoryLookup:
    plural = {"JobSet": "jobsets", "RayJob": "rayjobs", "TrainJob": "trainjobs"}
    queues = {(NS, "lq"): "cq-a"} | ({(NS, "default"): "cq-default"} if default_queue else {})
    return InMemoryLookup(
        local_queues=queues,
        owners={(plural[o["kind"]], NS, o["metadata"]["name"]): o for o in owners},
        admitted_jobs={(NS, o["metadata"]["name"]) for o in owners},
    )


def review_kind(obj: dict[str, Any]) -> dict[str, str]:
    return {"Job": JOB_KIND, "JobSet": JOBSET_KIND, "RayCluster": RAYCLUSTER_KIND}[obj["kind"]]


def decide(
    new: dict[str, Any], old: dict[str, Any] | None, lookup: InMemoryLookup, user: str = ALICE
) -> dict[str, Any]:
    return validate_job(request(new, old, kind=review_kind(new), user=user), lookup)


def changed(obj: dict[str, Any], edit: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
    out = copy.deepcopy(obj)
    edit(out)
    return out


# --- a plain user's change to a child: refused, naming the field --------------------------------
JS = jobset()
RJ = rayjob()
TJ = trainjob()
TJ_JOBSET = trainjob_jobset(TJ)


def _worker_spec(job: dict[str, Any]) -> dict[str, Any]:
    spec: dict[str, Any] = job["spec"]["template"]["spec"]
    return spec


REFUSED = [
    (
        "the issue: a JobSet's Job scaled from 4 pods to 100",
        world(JS),
        jobset_job(JS),
        lambda j: j["spec"].update(parallelism=100, completions=100),
        "spec.template (pods at once)",
    ),
    (
        "a JobSet's Job moved to the H100 nodes",
        world(JS),
        jobset_job(JS),
        lambda j: _worker_spec(j).update(nodeSelector={"team": "a", **H100}),
        "spec.template.spec.nodeSelector",
    ),
    (
        "a JobSet's Job given more GPUs a pod",
        world(JS),
        jobset_job(JS),
        lambda j: _worker_spec(j)["containers"][0].update(
            resources={"limits": {names.GPU_RESOURCE: "8"}}
        ),
        "spec.template (requests and limits of one pod)",
    ),
    (
        "the issue: a RayJob's RayCluster scaled from 3 workers to 50",
        world(RJ),
        rayjob_cluster(RJ),
        lambda c: c["spec"]["workerGroupSpecs"][0].update(replicas=50, maxReplicas=50),
        "spec.workerGroupSpecs[0].template (pods at once) (50)",
    ),
    (
        "a RayJob's RayCluster workers given a toleration of the H100 taint",
        world(RJ),
        rayjob_cluster(RJ),
        lambda c: c["spec"]["workerGroupSpecs"][0]["template"]["spec"].update(
            tolerations=[{"key": "h100", "operator": "Exists"}]
        ),
        "spec.workerGroupSpecs[0].template.spec.tolerations",
    ),
    (
        "a RayJob's submitter Job run 10 at once",
        world(RJ),
        rayjob_submitter(RJ),
        lambda j: j["spec"].update(parallelism=10),
        "spec.template (pods at once)",
    ),
    (
        "a TrainJob's JobSet scaled from 4 nodes to 40",
        world(TJ),
        TJ_JOBSET,
        lambda js: js["spec"]["replicatedJobs"][0]["template"]["spec"].update(
            parallelism=40, completions=40
        ),
        "spec.replicatedJobs[0].template.spec.template (pods at once)",
    ),
    (
        "a Job of a TrainJob's JobSet scaled (a chain of owners)",
        world(TJ, TJ_JOBSET),
        jobset_job(TJ_JOBSET, rjob=0),
        lambda j: j["spec"].update(parallelism=40, completions=40),
        "spec.template (pods at once)",
    ),
]


@pytest.mark.parametrize(
    ("lookup", "child", "edit", "said"),
    [pytest.param(*case[1:], id=case[0]) for case in REFUSED],
)
def test_a_user_cannot_make_a_child_run_other_than_its_owner_says(
    lookup: InMemoryLookup,
    child: dict[str, Any],
    edit: Callable[[dict[str, Any]], None],
    said: str,
) -> None:
    assert decide(child, None, lookup)["allowed"] is True, "as its operator made it"
    new = changed(child, edit)
    answer = decide(new, child, lookup)
    assert answer["allowed"] is False
    message = answer["status"]["message"]
    assert said in message and "departs from" in message, message
    assert "change " in message and "instead" in message  # what to do
    assert decide(new, child, lookup, user=names.CONTROLLER_USERNAME)["allowed"] is True
    assert decide(new, None, lookup)["allowed"] is False, "nor created so"


def test_the_operators_own_writes_agree_with_the_owner_and_pass() -> None:
    """JobSet, resuming, merges its template's nodeSelector and tolerations (queuectl's
    placement already in) into the Jobs it made while suspended; KubeRay makes the RayCluster
    from the RayJob; trainer makes the JobSet from the TrainJob with its overrides."""
    suspended_child = jobset_job(sample("jobset-driver-workers.yaml"))
    suspended_child["metadata"]["ownerReferences"] = [ref_to(JS)]
    resumed = copy.deepcopy(suspended_child)
    workers = _worker_spec(resumed)
    workers["nodeSelector"] = {**workers["nodeSelector"], **A100}
    workers["tolerations"] = [*workers["tolerations"], {"key": "a100", "operator": "Exists"}]
    owner = copy.deepcopy(JS)
    rjob_pod = owner["spec"]["replicatedJobs"][1]["template"]["spec"]["template"]["spec"]
    rjob_pod["tolerations"] = [*rjob_pod["tolerations"], {"key": "a100", "operator": "Exists"}]
    assert decide(resumed, suspended_child, world(owner), user=JOBSET_OPERATOR)["allowed"]
    assert decide(rayjob_cluster(RJ), None, world(RJ), user=KUBERAY)["allowed"]
    assert decide(rayjob_submitter(RJ), None, world(RJ), user=KUBERAY)["allowed"]
    assert decide(TJ_JOBSET, None, world(TJ))["allowed"]
    # The API server stores a Job's quantities canonical, a JobSet's as written.
    spelled = copy.deepcopy(JS)
    driver = spelled["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    driver["containers"][0]["resources"] = {"requests": {"cpu": "0.5", "memory": "1024Mi"}}
    made = jobset_job(spelled, rjob=0)
    made_pod = made["spec"]["template"]["spec"]["containers"][0]
    made_pod["resources"] = {"requests": {"cpu": "500m", "memory": "1Gi"}}
    assert decide(made, None, world(spelled), user=JOBSET_OPERATOR)["allowed"]
    # A stale key JobSet's merge leaves behind narrows placement: it is no departure.
    stale = changed(resumed, lambda j: _worker_spec(j)["nodeSelector"].update(rack="r1"))
    assert decide(stale, resumed, world(owner), user=JOBSET_OPERATOR)["allowed"]


def test_a_job_the_jobset_does_not_make_is_refused() -> None:
    """Index 5 of a replicated job of 2 replicas: an extra Job the JobSet's Workload does not
    cover, even when it is a faithful copy."""
    extra = jobset_job(JS, index=5)
    answer = decide(extra, None, world(JS))
    assert answer["allowed"] is False
    assert "makes no such Job" in answer["status"]["message"]


# --- a claim that does not hold: queued on its own ------------------------------------------
def forged(child: dict[str, Any], **ref: Any) -> dict[str, Any]:
    out = copy.deepcopy(child)
    out["metadata"]["ownerReferences"] = [{**out["metadata"]["ownerReferences"][0], **ref}]
    return out


def unqueued(owner: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(owner)
    del out["metadata"]["labels"][names.LABEL_QUEUE_NAME]
    return out


CLAIMS = [
    ("an owner that does not exist", forged(jobset_job(JS), name="nobody"), world(JS)),
    ("another object's uid", forged(jobset_job(JS), uid="not-its-uid"), world(JS)),
    ("an owner queuectl does not queue", jobset_job(JS), world(unqueued(JS))),
    (
        "a kind that makes no RayClusters",
        forged(
            rayjob_cluster(RJ),
            apiVersion="jobset.x-k8s.io/v1alpha2",
            kind="JobSet",
            name=JS["metadata"]["name"],
            uid=JS["metadata"]["uid"],
        ),
        world(JS),
    ),
]


@pytest.mark.parametrize(
    ("child", "lookup"), [pytest.param(*case[1:], id=case[0]) for case in CLAIMS]
)
def test_a_claimed_owner_that_does_not_hold_is_no_owner(
    child: dict[str, Any], lookup: InMemoryLookup
) -> None:
    """Before, any ownerReference to a registered kind let the object through both webhooks:
    it ran unqueued, as large as its author liked."""
    child = changed(child, lambda c: c["spec"].update(parallelism=100))
    own = (child["metadata"].get("labels") or {}).get(names.LABEL_QUEUE_NAME, "default")
    made = apply_patch(
        child, decode_patch(mutate_job(request(child, kind=review_kind(child)), lookup))
    )
    assert made["spec"]["suspend"] is True
    assert made["metadata"]["labels"][names.LABEL_QUEUE_NAME] == own  # its label, else default
    child["metadata"]["labels"] = {names.LABEL_QUEUE_NAME: "lq"}
    answer = decide(child, None, lookup)  # the mutating webhook bypassed: not suspended
    assert (
        answer["allowed"] is False
        and "must be created with spec.suspend=true" in (answer["status"]["message"])
    )


def test_a_claimed_owner_without_a_default_queue_leaves_the_object_unqueued() -> None:
    child = forged(jobset_job(JS), uid="not-its-uid")
    answer = mutate_job(request(child, kind=JOB_KIND), world(JS, default_queue=False))
    assert "patch" not in answer  # as any Job there: no label, no default LocalQueue


async def test_a_child_runs_only_once_its_owner_does() -> None:
    """The JobSet waits for quota (suspended), its Jobs made suspended with it. A user
    unsuspending one of them would run it on quota nobody admitted: refused. Once queuectl
    resumes the JobSet, its operator resumes the Jobs, even before the webhook's cache has
    seen the JobSet's resume (the owner is read again for a child that starts)."""
    waiting = copy.deepcopy(JS)
    waiting["spec"]["suspend"] = True
    held = jobset_job(waiting)
    held["spec"]["suspend"] = True
    resumed = changed(held, lambda j: j["spec"].update(suspend=False))
    lookup = world(waiting)
    answer = decide(resumed, held, lookup)
    assert answer["allowed"] is False
    assert (
        "cannot run while its JobSet 'driver-workers' is suspended" in (answer["status"]["message"])
    )
    assert decide(changed(resumed, lambda j: j), None, lookup)["allowed"] is False, "nor made so"
    lookup.api_server[("jobsets", NS, "driver-workers")] = JS  # queuectl resumed it
    review = request(resumed, held, kind=JOB_KIND, user=JOBSET_OPERATOR)
    await read_inputs(review, lookup)
    assert validate_job(review, lookup)["allowed"] is True


def test_a_job_that_only_now_names_its_owner_is_judged_whole() -> None:
    """A Job of one's own named as a JobSet's would be (scaled to 100 while it stood alone)
    gains the JobSet's ownerReference: it is judged as if created so."""
    child = changed(jobset_job(JS), lambda j: j["spec"].update(parallelism=100, completions=100))
    alone = changed(child, lambda c: c["metadata"].pop("ownerReferences"))
    answer = decide(child, alone, world(JS))
    assert answer["allowed"] is False and "(pods at once) (100)" in answer["status"]["message"]


def test_a_child_cannot_leave_its_owner() -> None:
    child = jobset_job(JS)
    orphan = changed(child, lambda c: c["metadata"].pop("ownerReferences"))
    answer = decide(orphan, child, world(JS))
    assert answer["allowed"] is False
    assert (
        "ownerReference to JobSet 'driver-workers' cannot be removed"
        in (answer["status"]["message"])
    )
    going = copy.deepcopy(JS)
    going["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    assert decide(orphan, child, world(going))["allowed"], "the garbage collector orphans it"


async def test_a_child_made_before_the_cache_has_its_owner_is_read_from_the_api_server() -> None:
    """JobSet makes its Jobs the moment the JobSet is created; the watch may bring the JobSet
    to the webhook's cache later. The webhook reads the owner it lacks (one GET, before the
    decision) rather than queue the child on its own."""
    lookup = world()
    lookup.api_server[("jobsets", NS, JS["metadata"]["name"])] = JS
    child = jobset_job(JS)
    review = request(child, kind=JOB_KIND, user=JOBSET_OPERATOR)
    assert "patch" in mutate_job(review, lookup), "without the read: taken for unowned"
    await read_inputs(review, lookup)
    assert "patch" not in mutate_job(review, lookup)
    assert validate_job(review, lookup)["allowed"] is True
