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
import time
from collections.abc import Iterator
from typing import Any

import pytest

from e2e.harness import (
    WL,
    ControllerProcess,
    apply,
    cluster_queue,
    condition,
    get,
    is_true,
    items,
    local_queue,
    low_and_high,
    notice_and_deadline,
    topology,
    wait_for,
)
from queuectl.api import names
from queuectl.cli.main import main as cli_main
from queuectl.testenv.cluster import Cluster
from queuectl.testenv.nodes import H100

pytestmark = [pytest.mark.operator("trainer"), pytest.mark.operator("jobset")]

FLEET = "trainjob-e2e"
FLEET_LABEL = "e2e.queuectl.io/fleet"
TAINT = {"key": FLEET_LABEL, "value": FLEET, "effect": "NoSchedule"}
TOLERATION = {"key": FLEET_LABEL, "operator": "Equal", "value": FLEET, "effect": "NoSchedule"}
GRACE = 6
TRAINER = "trainer.kubeflow.org/v1alpha1"
RUNTIME = "queuectl-e2e-torch"
POD_LABEL = "jobset.sigs.k8s.io/jobset-name"  # the JobSet trainer makes is named after it


@pytest.fixture(scope="module")
def fleet(control_plane: Cluster, operators: Any) -> Iterator[list[str]]:
    """Trainer and JobSet running (before the controller starts), a torch runtime shaped like
    trainer's `torch-distributed`, and this module's nodes."""
    operators("jobset")
    operators("trainer")
    apply(control_plane, runtime())
    nodes = control_plane.add_gpu_nodes(
        8,
        8,
        H100,
        blocks=1,
        racks_per_block=2,
        name_prefix="tj",
        labels={FLEET_LABEL: FLEET},
        taints=[TAINT],
    )
    yield [n.name for n in nodes]
    control_plane.kubectl("delete", "node", "-l", f"{FLEET_LABEL}={FLEET}", "--wait=false")


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


def setup_queue(cluster: Cluster, namespace: str, gpus: int, **spec: Any) -> None:
    topo, fl, cq = f"topo-{namespace}", f"h100-{namespace}", f"cq-{namespace}"
    apply(
        cluster,
        topology(topo, names.LABEL_TOPOLOGY_BLOCK, names.LABEL_TOPOLOGY_RACK, names.LABEL_HOSTNAME),
        {
            "apiVersion": names.API_VERSION,
            "kind": "ResourceFlavor",
            "metadata": {"name": fl},
            "spec": {
                "nodeLabels": {names.LABEL_GPU_PRODUCT: H100, FLEET_LABEL: FLEET},
                "tolerations": [TOLERATION],
                "topologyName": topo,
            },
        },
        cluster_queue(cq, namespace, {fl: gpus}, **spec),
        local_queue("lq", namespace, cq),
        # A default LocalQueue queues every unlabelled job here: not the derived JobSets.
        local_queue("default", namespace, cq),
    )


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


def workload_of(cluster: Cluster, namespace: str, name: str) -> dict[str, Any] | None:
    for wl in items(cluster, WL, namespace):
        refs = wl["metadata"].get("ownerReferences") or []
        if any(r.get("kind") == "TrainJob" and r.get("name") == name for r in refs):
            return wl
    return None


def admitted(cluster: Cluster, namespace: str, name: str) -> bool:
    wl = workload_of(cluster, namespace, name)
    return wl is not None and is_true(wl, names.COND_ADMITTED) and not is_true(wl, "Finished")


def running_pods(cluster: Cluster, namespace: str, name: str) -> list[dict[str, Any]]:
    return [
        p
        for p in items(cluster, "pods", namespace, "-l", f"{POD_LABEL}={name}")
        if (p.get("status") or {}).get("phase") == "Running"
        and not p["metadata"].get("deletionTimestamp")
    ]


def four_running_in_one_rack(cluster: Cluster, namespace: str, name: str) -> str:
    """Wait for the 4 pods to run; they are on 4 nodes of this pool, all in one rack (returned),
    and each carries the placement the overrides brought."""
    pods = wait_for(
        f"{name}: 4 pods running",
        lambda: len(p := running_pods(cluster, namespace, name)) == 4 and p,
        timeout=120,
    )
    nodes = [get(cluster, "node", p["spec"]["nodeName"]) for p in pods]
    assert {n["metadata"]["labels"].get(FLEET_LABEL) for n in nodes} == {FLEET}
    assert len({n["metadata"]["name"] for n in nodes}) == 4
    racks = {n["metadata"]["labels"][names.LABEL_TOPOLOGY_RACK] for n in nodes}
    assert len(racks) == 1, racks
    (rack,) = racks
    workload = (workload_of(cluster, namespace, name) or {})["metadata"]["name"]
    for pod in pods:
        assert pod["spec"]["nodeSelector"][names.LABEL_TOPOLOGY_RACK] == rack
        assert TOLERATION in pod["spec"]["tolerations"]
        assert pod["metadata"]["labels"][names.LABEL_WORKLOAD] == workload
    return str(rack)


def child_jobs_suspended(cluster: Cluster, namespace: str, name: str) -> bool:
    jobs = items(cluster, "jobs", namespace, "-l", f"{POD_LABEL}={name}")
    return bool(jobs) and all(j["spec"].get("suspend") for j in jobs)


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
    low, high = low_and_high(control_plane, namespace, GRACE)
    setup_queue(control_plane, namespace, 32, preemption={"withinClusterQueue": "LowerPriority"})
    apply(control_plane, trainjob("victim", namespace, priority=low))
    wait_for("victim admitted", lambda: admitted(control_plane, namespace, "victim"))
    four_running_in_one_rack(control_plane, namespace, "victim")
    apply(control_plane, trainjob("urgent", namespace, priority=high))

    # The notice: Preempted, a deadline on the TrainJob, and its pods keep running until then.
    wl, noticed, deadline = notice_and_deadline(
        lambda: workload_of(control_plane, namespace, "victim"),
        lambda: get(control_plane, "trainjob", "victim", namespace),
        "TrainJob",
    )
    assert (condition(wl, names.COND_PREEMPTED) or {}).get("reason") == (
        names.REASON_PREEMPTED_WITHIN_CQ
    )
    assert deadline - noticed > GRACE / 2
    assert len(running_pods(control_plane, namespace, "victim")) == 4
    assert not get(control_plane, "trainjob", "victim", namespace)["spec"].get("suspend")
    assert not admitted(control_plane, namespace, "urgent")

    # After it: suspended, its pods stopped, requeued, queuectl's overrides taken back out.
    wait_for(
        "victim suspended after its deadline",
        lambda: get(control_plane, "trainjob", "victim", namespace)["spec"].get("suspend"),
        timeout=GRACE + 30,
    )
    assert time.time() >= deadline - 1
    wait_for(
        "victim requeued",
        lambda: is_true(workload_of(control_plane, namespace, "victim"), names.COND_REQUEUED),
        timeout=90,
    )
    assert child_jobs_suspended(control_plane, namespace, "victim")
    assert running_pods(control_plane, namespace, "victim") == []
    restored = get(control_plane, "trainjob", "victim", namespace)
    assert (
        restored["spec"]["podTemplateOverrides"]
        == trainjob("victim", namespace)["spec"]["podTemplateOverrides"]
    )
    assert names.ANNOTATION_PREEMPTION_DEADLINE not in (
        restored["metadata"].get("annotations") or {}
    )
    wait_for("urgent admitted", lambda: admitted(control_plane, namespace, "urgent"), timeout=90)
    four_running_in_one_rack(control_plane, namespace, "urgent")

    # Later re-admitted: once urgent is gone the victim runs again, whole, in one rack.
    control_plane.kubectl("delete", "trainjob", "urgent", "-n", namespace)
    wait_for("victim re-admitted", lambda: admitted(control_plane, namespace, "victim"), timeout=90)
    four_running_in_one_rack(control_plane, namespace, "victim")


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
