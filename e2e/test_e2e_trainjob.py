"""Issue 14 e2e: Kubeflow TrainJobs queued on the real control plane with the real Trainer
(v2.1.0) and JobSet (v0.11.0) operators.

Trainer turns a TrainJob into a JobSet built from its ClusterTrainingRuntime, and JobSet into
child Jobs and pods on kwok GPU nodes. queuectl records the runtime's pod sets on the TrainJob
when it is created, holds it with spec.suspend, and places it through
spec.podTemplateOverrides (nodeSelector and tolerations, then the unsuspend).

A pool of its own: 2 racks x 4 nodes x 8 GPUs, labelled and tainted, behind a flavor that
selects and tolerates it, so other modules' nodes left in the session's control plane never
count, and no other pod lands here. A TrainJob of 4 nodes x 8 GPUs fits either rack but not
spread: all four pods in one rack shows the rack reached every pod through the overrides.
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

pytestmark = [pytest.mark.operator("trainer"), pytest.mark.operator("jobset")]

TRAINER = "trainer.kubeflow.org/v1alpha1"
RUNTIME = "queuectl-e2e-torch"
POOL = GangPool("trainjob-e2e", "trainjob", "TrainJob", timeout=90.0)
setup_queue = POOL.setup_queue
workload_of = POOL.workload_of
admitted = POOL.admitted
four_running_in_one_rack = POOL.four_running_in_one_rack


@pytest.fixture(scope="module")
def fleet(control_plane: Cluster, operators: Any) -> Iterator[list[str]]:
    """Trainer and JobSet running (before the controller starts), a torch runtime shaped like
    trainer's `torch-distributed`, and this module's nodes."""
    operators("jobset")
    operators("trainer")
    apply(control_plane, runtime())
    yield POOL.add_nodes(control_plane, "tj")
    POOL.remove_nodes(control_plane)


@pytest.fixture(scope="module")
def queued(fleet: list[str], controller: ControllerProcess) -> ControllerProcess:
    """The controller, started once the TrainJob and runtime CRDs are served."""
    return controller


def runtime() -> dict[str, Any]:
    return {
        "apiVersion": TRAINER,
        "kind": "ClusterTrainingRuntime",
        "metadata": {"name": RUNTIME},
        "spec": {
            "mlPolicy": {"numNodes": 1, "torch": {"numProcPerNode": "auto"}},
            "template": {
                "spec": {
                    "replicatedJobs": [
                        {
                            "name": "node",
                            "template": {
                                "metadata": {
                                    "labels": {
                                        "trainer.kubeflow.org/trainjob-ancestor-step": "trainer"
                                    }
                                },
                                "spec": {
                                    "backoffLimit": 0,
                                    "template": {
                                        "spec": {
                                            "restartPolicy": "Never",
                                            "terminationGracePeriodSeconds": 0,
                                            "containers": [
                                                {
                                                    "name": "node",
                                                    "image": "registry.k8s.io/pause:3.10",
                                                }
                                            ],
                                        }
                                    },
                                },
                            },
                        }
                    ]
                }
            },
        },
    }


def trainjob(
    name: str, namespace: str, *, priority: str | None = None, runs_for: str | None = None
) -> dict[str, Any]:
    """4 nodes x 8 GPUs, kept in one rack (the user's own override asks for it)."""
    labels = {names.LABEL_QUEUE_NAME: "lq"}
    if priority:
        labels[names.LABEL_PRIORITY_CLASS] = priority
    annotations = {names.ANNOTATION_PODSET_REQUIRED_TOPOLOGY: names.LABEL_TOPOLOGY_RACK}
    if runs_for:
        annotations[names.ANNOTATION_TESTENV_SUCCEED_AFTER] = runs_for
    gpus = {names.GPU_RESOURCE: "8"}
    return {
        "apiVersion": TRAINER,
        "kind": "TrainJob",
        "metadata": {"name": name, "namespace": namespace, "labels": labels},
        "spec": {
            "runtimeRef": {"name": RUNTIME},
            "trainer": {"numNodes": 4, "resourcesPerNode": {"requests": gpus, "limits": gpus}},
            "podTemplateOverrides": [
                {"targetJobs": [{"name": "node"}], "metadata": {"annotations": annotations}}
            ],
        },
    }


def test_a_trainjob_of_4_nodes_is_admitted_whole_inside_one_rack_and_finishes(
    control_plane: Cluster,
    namespace: str,
    queued: ControllerProcess,
    capsys: pytest.CaptureFixture[str],
) -> None:
    setup_queue(control_plane, namespace, 64)
    apply(control_plane, trainjob("blocker", namespace))  # half the pool taken first
    wait_for("blocker admitted", lambda: admitted(control_plane, namespace, "blocker"))
    gang = trainjob("gang", namespace, runs_for="8s")
    dry = control_plane.kubectl(
        "create", "--dry-run=server", "-o", "json", "-f", "-", input=json.dumps(gang)
    )
    made = json.loads(dry.stdout)
    assert made["spec"]["suspend"] is True  # the webhook holds it and records its runtime
    assert names.ANNOTATION_TRAINJOB_RUNTIME in made["metadata"]["annotations"]
    apply(control_plane, gang)
    wl = wait_for("gang's Workload", lambda: workload_of(control_plane, namespace, "gang"))
    assert [(ps["name"], ps["count"]) for ps in wl["spec"]["podSets"]] == [("node", 4)]
    assert wl["spec"]["podSets"][0]["topologyRequest"] == {"required": names.LABEL_TOPOLOGY_RACK}
    wait_for("gang admitted", lambda: admitted(control_plane, namespace, "gang"))
    blocker_rack = four_running_in_one_rack(control_plane, namespace, "blocker")
    gang_rack = four_running_in_one_rack(control_plane, namespace, "gang")
    assert gang_rack != blocker_rack  # one rack each: the pool has two
    # One Workload per TrainJob, none for the JobSets trainer made (queued whole, not twice).
    owners = sorted(
        ref["kind"]
        for w in items(control_plane, WL, namespace)
        for ref in w["metadata"]["ownerReferences"]
    )
    assert owners == ["TrainJob", "TrainJob"], owners
    # `queuectl describe trainjob` finds the Workload, as a user types it
    argv = [
        "describe",
        "trainjob",
        "gang",
        "-n",
        namespace,
        "--kubeconfig",
        control_plane.kubeconfig,
    ]
    assert cli_main(argv) == 0
    assert wl["metadata"]["name"] in capsys.readouterr().out
    wait_for(
        "gang finished",
        lambda: is_true(workload_of(control_plane, namespace, "gang"), "Finished"),
        timeout=90,
    )
    done = workload_of(control_plane, namespace, "gang") or {}
    assert (condition(done, "Finished") or {}).get("reason") == names.REASON_FINISHED_SUCCEEDED


def test_a_preempted_trainjob_gets_its_grace_period_then_is_suspended_requeued_and_readmitted(
    control_plane: Cluster, namespace: str, queued: ControllerProcess
) -> None:
    def overrides_taken_back_out(restored: dict[str, Any]) -> None:
        mine = trainjob("victim", namespace)["spec"]["podTemplateOverrides"]
        assert restored["spec"]["podTemplateOverrides"] == mine

    POOL.preempted_with_grace_then_requeued_and_readmitted(
        control_plane, namespace, trainjob, overrides_taken_back_out
    )


def test_bypass_attempts_on_a_trainjob_are_refused(
    control_plane: Cluster, namespace: str, queued: ControllerProcess
) -> None:
    setup_queue(control_plane, namespace, 32)
    apply(control_plane, trainjob("running", namespace), trainjob("waiting", namespace))
    wait_for(
        "one admitted, one waiting with its Workload",
        lambda: (
            admitted(control_plane, namespace, "running")
            and workload_of(control_plane, namespace, "waiting") is not None
        ),
    )
    four_running_in_one_rack(control_plane, namespace, "running")

    def refused(*args: str, stdin: str | None = None) -> str:
        with pytest.raises(subprocess.CalledProcessError) as err:
            control_plane.kubectl(*args, input=stdin)
        return str(err.value.stderr)

    why = refused(
        "patch", "trainjob", "waiting", "-n", namespace, "--type=merge",
        "-p", '{"spec":{"suspend":false}}',
    )  # fmt: skip
    assert "not admitted" in why, why
    why = refused(
        "patch", "trainjob", "running", "-n", namespace, "--type=merge",
        "-p", '{"spec":{"trainer":{"numNodes":8}}}',
    )  # fmt: skip
    assert "from 4 to 8 while it is admitted" in why, why
    assert get(control_plane, "trainjob", "running", namespace)["spec"]["trainer"]["numNodes"] == 4
    why = refused(
        "annotate", "trainjob", "running", "-n", namespace, "--overwrite",
        f"{names.ANNOTATION_TRAINJOB_RUNTIME}={{}}",
    )  # fmt: skip
    assert "queuectl's record of the runtime" in why, why
    typo = trainjob("typo", namespace)
    typo["spec"]["runtimeRef"]["name"] = "no-such-runtime"
    why = refused("create", "-f", "-", stdin=json.dumps(typo))
    assert "ClusterTrainingRuntime 'no-such-runtime' (spec.runtimeRef) does not exist" in why, why
    assert get(control_plane, "trainjob", "waiting", namespace)["spec"]["suspend"] is True
    assert items(control_plane, "pods", namespace, "-l", f"{POD_LABEL}=waiting") == []


def test_a_runtime_and_its_trainjob_in_one_kubectl_apply_are_queued_and_run(
    control_plane: Cluster, namespace: str, queued: ControllerProcess
) -> None:
    """A team ships its own TrainingRuntime beside the job (one file, one `kubectl apply`).
    On a busy API server the TrainJob's webhook call can arrive before the runtime reaches
    queuectl's cache through the watch; it is then read from the API server (the unit test
    `test_a_runtime_applied_with_its_trainjob_is_read_before_the_watch_delivers_it` forces
    that order; here the watch usually wins)."""
    setup_queue(control_plane, namespace, 32)
    own = runtime()
    own["kind"] = "TrainingRuntime"
    own["metadata"] = {"name": "team-torch", "namespace": namespace}
    job = trainjob("together", namespace, runs_for="4s")
    job["spec"]["runtimeRef"] = {
        "apiGroup": "trainer.kubeflow.org",
        "kind": "TrainingRuntime",
        "name": "team-torch",
    }
    both = {"apiVersion": "v1", "kind": "List", "items": [own, job]}
    control_plane.kubectl("apply", "-f", "-", input=json.dumps(both))
    made = get(control_plane, "trainjob", "together", namespace)
    assert names.ANNOTATION_TRAINJOB_RUNTIME in made["metadata"]["annotations"]
    wait_for("together admitted", lambda: admitted(control_plane, namespace, "together"))
    four_running_in_one_rack(control_plane, namespace, "together")
