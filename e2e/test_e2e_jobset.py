"""Issue 14 e2e: JobSets queued on the real control plane with the real JobSet operator (v0.11.0).

The JobSet operator turns each admitted JobSet into child Jobs and those into pods on kwok GPU
nodes; queuectl holds it with spec.suspend and places it through nodeSelector and tolerations
in every replicated job's template (the fields JobSet copies onto its child Jobs on resume).

A fleet of its own: 2 racks x 4 nodes x 8 GPUs, tainted, behind a flavor that selects and
tolerates it, so no other test's pods land there and these land nowhere else. A gang of
4 x 8 GPUs fits either rack but not spread: the scheduler would spread it, so all four pods in
one rack shows that the rack reached every child Job's pods.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from typing import Any

import pytest

from e2e.gang_pool import POD_LABEL, GangPool
from e2e.harness import (
    WL,
    ControllerProcess,
    apply,
    condition,
    get,
    is_true,
    items,
    wait_for,
)
from queuectl.api import names
from queuectl.cli.main import main as cli_main
from queuectl.testenv.cluster import Cluster

pytestmark = pytest.mark.operator("jobset")

JOBSET = "jobset.x-k8s.io/v1alpha2"
POOL = GangPool("jobset-e2e", "jobset", "JobSet")
setup_queue = POOL.setup_queue
workload_of = POOL.workload_of
admitted = POOL.admitted
four_running_in_one_rack = POOL.four_running_in_one_rack
child_jobs = POOL.child_jobs
child_jobs_suspended = POOL.child_jobs_suspended


@pytest.fixture(scope="module")
def fleet(control_plane: Cluster, operators: Any) -> Iterator[list[str]]:
    """The JobSet operator running (before the controller starts) and this module's nodes."""
    operators("jobset")
    yield POOL.add_nodes(control_plane, "js")
    POOL.remove_nodes(control_plane)


@pytest.fixture(scope="module")
def queued(fleet: list[str], controller: ControllerProcess) -> ControllerProcess:
    """The controller, started once the JobSet CRD is served (so it watches JobSets at once)."""
    return controller


def jobset(
    name: str, namespace: str, *, priority: str | None = None, runs_for: str | None = None
) -> dict[str, Any]:
    """A gang of 4 x 8 GPUs that needs one rack: 2 child Jobs x 2 pods."""
    labels = {names.LABEL_QUEUE_NAME: "lq"}
    if priority:
        labels[names.LABEL_PRIORITY_CLASS] = priority
    annotations = {names.ANNOTATION_PODSET_REQUIRED_TOPOLOGY: names.LABEL_TOPOLOGY_RACK}
    if runs_for:
        annotations[names.ANNOTATION_TESTENV_SUCCEED_AFTER] = runs_for
    gpus = {names.GPU_RESOURCE: "8"}
    return {
        "apiVersion": JOBSET,
        "kind": "JobSet",
        "metadata": {"name": name, "namespace": namespace, "labels": labels},
        "spec": {
            "replicatedJobs": [
                {
                    "name": "workers",
                    "replicas": 2,
                    "template": {
                        "spec": {
                            "parallelism": 2,
                            "completions": 2,
                            "backoffLimit": 0,
                            "template": {
                                "metadata": {"annotations": annotations},
                                "spec": {
                                    "restartPolicy": "Never",
                                    "terminationGracePeriodSeconds": 0,
                                    "containers": [
                                        {
                                            "name": "main",
                                            "image": "registry.k8s.io/pause:3.10",
                                            "resources": {"requests": gpus, "limits": gpus},
                                        }
                                    ],
                                },
                            },
                        }
                    },
                }
            ]
        },
    }


def test_a_jobset_gang_is_admitted_whole_inside_one_rack_and_finishes(
    control_plane: Cluster,
    namespace: str,
    queued: ControllerProcess,
    capsys: pytest.CaptureFixture[str],
) -> None:
    setup_queue(control_plane, namespace, 64)
    apply(control_plane, jobset("blocker", namespace))  # half the fleet taken first
    wait_for("blocker admitted", lambda: admitted(control_plane, namespace, "blocker"))
    gang = jobset("gang", namespace, runs_for="8s")
    dry = control_plane.kubectl(
        "create", "--dry-run=server", "-o", "json", "-f", "-", input=json.dumps(gang)
    )
    assert json.loads(dry.stdout)["spec"]["suspend"] is True  # the webhook holds it
    apply(control_plane, gang)
    wl = wait_for("gang's Workload", lambda: workload_of(control_plane, namespace, "gang"))
    assert [(ps["name"], ps["count"]) for ps in wl["spec"]["podSets"]] == [("workers", 4)]
    assert wl["spec"]["podSets"][0]["topologyRequest"] == {"required": names.LABEL_TOPOLOGY_RACK}
    wait_for("gang admitted", lambda: admitted(control_plane, namespace, "gang"))
    blocker_rack = four_running_in_one_rack(control_plane, namespace, "blocker")
    gang_rack = four_running_in_one_rack(control_plane, namespace, "gang")
    assert gang_rack != blocker_rack  # one rack each: the fleet has two
    # One Workload per JobSet, none for their child Jobs (queued whole, not twice).
    owners = sorted(
        ref["kind"]
        for w in items(control_plane, WL, namespace)
        for ref in w["metadata"]["ownerReferences"]
    )
    assert owners == ["JobSet", "JobSet"], owners
    for child in child_jobs(control_plane, namespace, "gang"):
        assert names.LABEL_QUEUE_NAME not in (child["metadata"].get("labels") or {})
    # `queuectl describe jobset` finds the Workload, as a user types it
    argv = ["describe", "jobset", "gang", "-n", namespace, "--kubeconfig", control_plane.kubeconfig]
    assert cli_main(argv) == 0
    assert wl["metadata"]["name"] in capsys.readouterr().out
    wait_for(
        "gang finished",
        lambda: is_true(workload_of(control_plane, namespace, "gang"), "Finished"),
        timeout=60,
    )
    done = workload_of(control_plane, namespace, "gang") or {}
    assert (condition(done, "Finished") or {}).get("reason") == names.REASON_FINISHED_SUCCEEDED


def test_a_preempted_jobset_gets_its_grace_period_then_is_suspended_requeued_and_readmitted(
    control_plane: Cluster, namespace: str, queued: ControllerProcess
) -> None:
    def placement_taken_back_out(restored: dict[str, Any]) -> None:
        rjob = restored["spec"]["replicatedJobs"][0]
        pod_spec = rjob["template"]["spec"]["template"]["spec"]
        assert "nodeSelector" not in pod_spec and "tolerations" not in pod_spec

    POOL.preempted_with_grace_then_requeued_and_readmitted(
        control_plane, namespace, jobset, placement_taken_back_out
    )


def test_bypass_attempts_on_a_jobset_are_refused(
    control_plane: Cluster, namespace: str, queued: ControllerProcess
) -> None:
    setup_queue(control_plane, namespace, 32)
    apply(control_plane, jobset("running", namespace), jobset("waiting", namespace))
    wait_for(
        "one admitted, one waiting with its Workload",
        lambda: (
            admitted(control_plane, namespace, "running")
            and workload_of(control_plane, namespace, "waiting") is not None
        ),
    )
    four_running_in_one_rack(control_plane, namespace, "running")

    def refused(*args: str) -> str:
        with pytest.raises(subprocess.CalledProcessError) as err:
            control_plane.kubectl(*args)
        return str(err.value.stderr)

    why = refused(
        "patch", "jobset", "waiting", "-n", namespace, "--type=merge",
        "-p", '{"spec":{"suspend":false}}',
    )  # fmt: skip
    assert "not admitted" in why, why
    running = get(control_plane, "jobset", "running", namespace)
    rjobs = running["spec"]["replicatedJobs"]
    rjobs[0]["replicas"] = 3
    why = refused(
        "patch", "jobset", "running", "-n", namespace, "--type=merge",
        "-p", json.dumps({"spec": {"replicatedJobs": rjobs}}),
    )  # fmt: skip
    # Both JobSet's own webhook (replicatedJobs are immutable while it runs) and queuectl's
    # (its shape is what the quota was sized for) refuse it; either may answer first.
    assert "replicatedJobs" in why or "while it is admitted" in why, why
    assert (
        get(control_plane, "jobset", "running", namespace)["spec"]["replicatedJobs"][0]["replicas"]
        == 2
    )
    assert get(control_plane, "jobset", "waiting", namespace)["spec"]["suspend"] is True
    assert child_jobs_suspended(control_plane, namespace, "waiting")
    assert items(control_plane, "pods", namespace, "-l", f"{POD_LABEL}=waiting") == []
    # Its child Jobs carry no queue label: owned-job.validate holds them to their JobSet.
    # (An Indexed Job, as JobSet makes them, scales by parallelism and completions together.)
    (child, *_) = wait_for(
        "running's Jobs", lambda: child_jobs(control_plane, namespace, "running")
    )
    why = refused(
        "patch", "job", child["metadata"]["name"], "-n", namespace, "--type=merge",
        "-p", '{"spec":{"parallelism":100,"completions":100}}',
    )  # fmt: skip
    assert "(pods at once)" in why and "departs from JobSet 'running'" in why, why
    (held, *_) = wait_for("waiting's Jobs", lambda: child_jobs(control_plane, namespace, "waiting"))
    why = refused(
        "patch", "job", held["metadata"]["name"], "-n", namespace, "--type=merge",
        "-p", '{"spec":{"suspend":false}}',
    )  # fmt: skip
    assert "cannot run while its JobSet 'waiting' is suspended" in why, why
