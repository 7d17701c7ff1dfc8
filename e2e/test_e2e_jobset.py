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

pytestmark = pytest.mark.operator("jobset")

FLEET = "jobset-e2e"
FLEET_LABEL = "e2e.queuectl.io/fleet"
TAINT = {"key": FLEET_LABEL, "value": FLEET, "effect": "NoSchedule"}
TOLERATION = {"key": FLEET_LABEL, "operator": "Equal", "value": FLEET, "effect": "NoSchedule"}
GRACE = 6
JOBSET = "jobset.x-k8s.io/v1alpha2"
POD_LABEL = "jobset.sigs.k8s.io/jobset-name"


@pytest.fixture(scope="module")
def fleet(control_plane: Cluster, operators: Any) -> Iterator[list[str]]:
    """The JobSet operator running (before the controller starts) and this module's nodes."""
    operators("jobset")
    nodes = control_plane.add_gpu_nodes(
        8,
        8,
        H100,
        blocks=1,
        racks_per_block=2,
        name_prefix="js",
        labels={FLEET_LABEL: FLEET},
        taints=[TAINT],
    )
    yield [n.name for n in nodes]
    control_plane.kubectl("delete", "node", "-l", f"{FLEET_LABEL}={FLEET}", "--wait=false")


@pytest.fixture(scope="module")
def queued(fleet: list[str], controller: ControllerProcess) -> ControllerProcess:
    """The controller, started once the JobSet CRD is served (so it watches JobSets at once)."""
    return controller


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
        # A default LocalQueue queues every unlabelled job here: not the JobSets' child Jobs.
        local_queue("default", namespace, cq),
    )


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


def workload_of(cluster: Cluster, namespace: str, name: str) -> dict[str, Any] | None:
    for wl in items(cluster, WL, namespace):
        refs = wl["metadata"].get("ownerReferences") or []
        if any(r.get("kind") == "JobSet" and r.get("name") == name for r in refs):
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
    """Wait for the gang's 4 pods to run; they are on 4 nodes of this fleet, all in one rack
    (returned), and each carries the placement JobSet copied onto its child Job."""
    pods = wait_for(
        f"{name}: 4 pods running",
        lambda: len(p := running_pods(cluster, namespace, name)) == 4 and p,
        timeout=90,
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


def child_jobs(cluster: Cluster, namespace: str, name: str) -> list[dict[str, Any]]:
    return items(cluster, "jobs", namespace, "-l", f"{POD_LABEL}={name}")


def child_jobs_suspended(cluster: Cluster, namespace: str, name: str) -> bool:
    jobs = child_jobs(cluster, namespace, name)
    return bool(jobs) and all(j["spec"].get("suspend") for j in jobs)


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
    low, high = low_and_high(control_plane, namespace, GRACE)
    setup_queue(control_plane, namespace, 32, preemption={"withinClusterQueue": "LowerPriority"})
    apply(control_plane, jobset("victim", namespace, priority=low))
    wait_for("victim admitted", lambda: admitted(control_plane, namespace, "victim"))
    four_running_in_one_rack(control_plane, namespace, "victim")
    apply(control_plane, jobset("urgent", namespace, priority=high))

    # The notice: Preempted, a deadline on the JobSet, and its pods keep running until then.
    wl, noticed, deadline = notice_and_deadline(
        lambda: workload_of(control_plane, namespace, "victim"),
        lambda: get(control_plane, "jobset", "victim", namespace),
        "JobSet",
    )
    assert (condition(wl, names.COND_PREEMPTED) or {}).get("reason") == (
        names.REASON_PREEMPTED_WITHIN_CQ
    )
    assert deadline - noticed > GRACE / 2
    assert len(running_pods(control_plane, namespace, "victim")) == 4
    assert not get(control_plane, "jobset", "victim", namespace)["spec"].get("suspend")
    assert not admitted(control_plane, namespace, "urgent")

    # After it: suspended, its child Jobs and pods stopped, requeued, templates restored.
    wait_for(
        "victim suspended after its deadline",
        lambda: get(control_plane, "jobset", "victim", namespace)["spec"].get("suspend"),
        timeout=GRACE + 30,
    )
    assert time.time() >= deadline - 1
    wait_for(
        "victim requeued",
        lambda: is_true(workload_of(control_plane, namespace, "victim"), names.COND_REQUEUED),
        timeout=60,
    )
    assert child_jobs_suspended(control_plane, namespace, "victim")
    assert running_pods(control_plane, namespace, "victim") == []
    restored = get(control_plane, "jobset", "victim", namespace)
    pod_spec = restored["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    assert "nodeSelector" not in pod_spec and "tolerations" not in pod_spec
    assert names.ANNOTATION_PREEMPTION_DEADLINE not in (
        restored["metadata"].get("annotations") or {}
    )
    wait_for("urgent admitted", lambda: admitted(control_plane, namespace, "urgent"), timeout=60)
    four_running_in_one_rack(control_plane, namespace, "urgent")

    # Later re-admitted: once urgent is gone the victim runs again, whole, in one rack.
    control_plane.kubectl("delete", "jobset", "urgent", "-n", namespace)
    wait_for("victim re-admitted", lambda: admitted(control_plane, namespace, "victim"), timeout=60)
    four_running_in_one_rack(control_plane, namespace, "victim")


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
