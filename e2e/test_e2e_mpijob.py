"""MPIJob on the real mpi-operator v0.6.0 and the kwok GPU fleet (8 nodes of 8 H100 of the
module's own: 2 blocks of 4 nodes).

A low-priority MPIJob is created suspended and admitted as one gang: its launcher and 3 GPU
workers are one Workload, placed in one block; its workers (pods mpi-operator makes) and its
launcher (the pod of the Job mpi-operator made while the MPIJob waited) carry the flavor's node
affinity and toleration. A high-priority MPIJob preempts it with the grace period (notice, runs
on, suspended after the deadline, pods gone, requeued); once that one goes, the first is admitted
again and its launcher Job follows the new placement.
"""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from e2e.harness import (
    POOL,
    WL,
    ControllerProcess,
    apply,
    flavor,
    get,
    in_pool,
    is_true,
    items,
    local_queue,
    pool_taint,
    priority_class,
    topology,
    wait_for,
)
from queuectl.api import names
from queuectl.convert import parse_time
from queuectl.testenv.cluster import Cluster
from queuectl.testenv.nodes import H100

pytestmark = [pytest.mark.operator("mpi-operator")]
GRACE = 6
PAUSE = "registry.k8s.io/pause:3.10"
AFFINITY = "requiredDuringSchedulingIgnoredDuringExecution"
MPI = "mpi"
JOB_NAME = "training.kubeflow.org/job-name"


@pytest.fixture(scope="module")
def pool(control_plane: Cluster) -> None:
    """The module's own nodes, tainted so that only its flavor reaches them."""
    control_plane.add_gpu_nodes(
        8,
        8,
        H100,
        81559,
        blocks=2,
        racks_per_block=2,
        name_prefix=MPI,
        labels={POOL: MPI},
        taints=[pool_taint(MPI)],
    )


@pytest.fixture(scope="module", autouse=True)
def _operator(operators: Any) -> None:
    """Before the module's controller starts, so it watches MPIJobs from its start."""
    operators("mpi-operator")


def template(gpus: int, container: str) -> dict[str, Any]:
    """One pod of the gang: the launcher (no GPUs) and the workers name one pod-set group
    with a required block, so the whole gang lands in one block."""
    requests = {"cpu": "1", **({names.GPU_RESOURCE: str(gpus)} if gpus else {})}
    return {
        "metadata": {
            "annotations": {
                names.ANNOTATION_PODSET_REQUIRED_TOPOLOGY: names.LABEL_TOPOLOGY_BLOCK,
                names.ANNOTATION_PODSET_GROUP_NAME: "mpi",
            }
        },
        "spec": {
            "terminationGracePeriodSeconds": 0,
            "containers": [
                {
                    "name": container,
                    "image": PAUSE,
                    "resources": {"requests": requests, "limits": requests},
                }
            ],
        },
    }


def mpi_job(name: str, ns: str, priority: str, workers: int) -> dict[str, Any]:
    """Shaped like mpi-operator's examples/v2beta1/pi: a launcher and `workers` GPU workers."""
    return {
        "apiVersion": "kubeflow.org/v2beta1",
        "kind": "MPIJob",
        "metadata": {
            "name": name,
            "namespace": ns,
            "labels": {names.LABEL_QUEUE_NAME: "lq", names.LABEL_PRIORITY_CLASS: priority},
        },
        "spec": {
            "slotsPerWorker": 8,
            "runPolicy": {"cleanPodPolicy": "Running"},
            "mpiReplicaSpecs": {
                "Launcher": {"replicas": 1, "template": template(0, "mpi-launcher")},
                "Worker": {"replicas": workers, "template": template(8, "mpi-worker")},
            },
        },
    }


def queue_setup(cluster: Cluster, ns: str, gpus: int) -> None:
    """A ClusterQueue over GPUs and CPU (the launcher asks for CPU only) on the pool's H100
    flavor with a block/rack/host Topology; priorities low (grace) and high."""
    topo, fl = f"topo-{ns}", f"h100-{ns}"
    quota = [
        {"name": names.GPU_RESOURCE, "nominalQuota": gpus},
        {"name": "cpu", "nominalQuota": 64},
    ]
    apply(
        cluster,
        topology(topo, names.LABEL_TOPOLOGY_BLOCK, names.LABEL_TOPOLOGY_RACK, names.LABEL_HOSTNAME),
        in_pool(flavor(fl, H100, topology=topo), MPI),
        priority_class(f"low-{ns}", 10, grace=GRACE),
        priority_class(f"high-{ns}", 1000),
        {
            "apiVersion": names.API_VERSION,
            "kind": "ClusterQueue",
            "metadata": {"name": f"cq-{ns}"},
            "spec": {
                "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": ns}},
                "resourceGroups": [
                    {
                        "coveredResources": [q["name"] for q in quota],
                        "flavors": [{"name": fl, "resources": quota}],
                    }
                ],
                "preemption": {"withinClusterQueue": "LowerPriority"},
            },
        },
        local_queue("lq", ns, f"cq-{ns}"),
    )


def workload(cluster: Cluster, ns: str, name: str, kind: str = "MPIJob") -> dict[str, Any] | None:
    for wl in items(cluster, WL, ns):
        for ref in wl["metadata"].get("ownerReferences") or []:
            if ref.get("kind") == kind and ref.get("name") == name:
                return wl
    return None


def admitted(cluster: Cluster, ns: str, name: str) -> bool:
    return is_true(workload(cluster, ns, name), names.COND_ADMITTED)


def running(cluster: Cluster, ns: str, name: str) -> list[dict[str, Any]]:
    """The MPIJob's running pods: its workers and its launcher Job's pod."""
    return [
        p
        for p in items(cluster, "pods", ns, "-l", f"{JOB_NAME}={name}")
        if p["status"].get("phase") == "Running" and not p["metadata"].get("deletionTimestamp")
    ]


def role(pod: dict[str, Any]) -> str:
    return str(pod["metadata"]["labels"].get("training.kubeflow.org/job-role"))


def required_keys(pod: dict[str, Any]) -> set[str]:
    node = (pod["spec"].get("affinity") or {}).get("nodeAffinity") or {}
    terms = (node.get(AFFINITY) or {}).get("nodeSelectorTerms") or [{}]
    return {e["key"] for e in terms[0].get("matchExpressions") or []}


def blocks(cluster: Cluster, pods: list[dict[str, Any]]) -> set[str]:
    return {
        get(cluster, "node", p["spec"]["nodeName"])["metadata"]["labels"][
            names.LABEL_TOPOLOGY_BLOCK
        ]
        for p in pods
    }


def gang_running(cluster: Cluster, ns: str, name: str, workers: int) -> list[dict[str, Any]]:
    pods = wait_for(
        f"{name}: launcher and {workers} workers running",
        lambda: len(p := running(cluster, ns, name)) == workers + 1 and p,
        timeout=90,
    )
    assert sorted(role(p) for p in pods) == ["launcher"] + ["worker"] * workers
    return pods  # type: ignore[no-any-return]


def test_an_mpijob_is_one_gang_placed_in_one_block_and_preempted_with_its_grace_period(
    control_plane: Cluster, namespace: str, pool: None, controller: ControllerProcess
) -> None:
    ns, c = namespace, control_plane
    queue_setup(c, ns, gpus=32)
    made = c.kubectl(
        "create", "-o", "json", "-f", "-", input=json.dumps(mpi_job("train", ns, f"low-{ns}", 3))
    )
    assert json.loads(made.stdout)["spec"]["runPolicy"]["suspend"] is True  # created suspended
    wl = wait_for(
        "the MPIJob admitted", lambda: admitted(c, ns, "train") and workload(c, ns, "train")
    )
    assert [(p["name"], p["count"]) for p in wl["spec"]["podSets"]] == [
        ("launcher", 1),
        ("worker", 3),
    ]
    pods = gang_running(c, ns, "train", 3)
    assert len(blocks(c, pods)) == 1  # the gang in one block
    toleration = {**pool_taint(MPI), "operator": "Equal"}
    for p in pods:  # the placement reached the workers and the launcher Job's pod
        keys = required_keys(p)
        assert {names.LABEL_GPU_PRODUCT, POOL, names.LABEL_TOPOLOGY_BLOCK} <= keys, (role(p), keys)
        assert toleration in p["spec"]["tolerations"], role(p)
        assert p["metadata"]["labels"][names.LABEL_WORKLOAD] == wl["metadata"]["name"]
    launcher_job = get(c, "job", "train-launcher", ns)
    assert (
        launcher_job["spec"]["template"]["metadata"]["labels"][names.LABEL_WORKLOAD]
        == (wl["metadata"]["name"])
    )
    assert workload(c, ns, "train-launcher", kind="Job") is None  # part of the MPIJob's Workload

    apply(c, mpi_job("urgent", ns, f"high-{ns}", workers=2))
    wait_for("the MPIJob noticed", lambda: is_true(workload(c, ns, "train"), names.COND_PREEMPTED))
    noticed = time.time()
    victim = get(c, "mpijob", "train", ns)
    deadline = parse_time(victim["metadata"]["annotations"][names.ANNOTATION_PREEMPTION_DEADLINE])
    assert deadline is not None and deadline - noticed > GRACE / 2
    assert not victim["spec"]["runPolicy"].get("suspend")
    assert len(running(c, ns, "train")) == 4  # it runs on through its grace period
    assert not admitted(c, ns, "urgent")
    wait_for(
        "the MPIJob suspended after its deadline",
        lambda: get(c, "mpijob", "train", ns)["spec"]["runPolicy"].get("suspend"),
        timeout=GRACE + 30,
    )
    assert time.time() >= deadline - 1
    requeued = wait_for(
        "the MPIJob requeued",
        lambda: (w := workload(c, ns, "train")) and is_true(w, names.COND_REQUEUED) and w,
        timeout=60,
    )
    assert not (requeued.get("status") or {}).get("admission")
    assert running(c, ns, "train") == []
    assert get(c, "job", "train-launcher", ns)["spec"]["suspend"] is True

    uwl = wait_for(
        "the urgent MPIJob admitted",
        lambda: admitted(c, ns, "urgent") and workload(c, ns, "urgent"),
    )
    for p in gang_running(c, ns, "urgent", 2):
        assert names.LABEL_GPU_PRODUCT in required_keys(p)
        assert p["metadata"]["labels"][names.LABEL_WORKLOAD] == uwl["metadata"]["name"]
    assert not admitted(c, ns, "train")  # 24 + 16 GPUs do not fit in 32

    c.kubectl("delete", "mpijob", "urgent", "-n", ns, "--wait=false")
    wait_for("the MPIJob admitted again", lambda: admitted(c, ns, "train"), timeout=90)
    again = workload(c, ns, "train")
    assert again is not None
    block = again["status"]["admission"]["podSetAssignments"]
    pods = gang_running(c, ns, "train", 3)
    assert len(blocks(c, pods)) == 1, block
    launcher = next(p for p in pods if role(p) == "launcher")
    assert {names.LABEL_GPU_PRODUCT, POOL} <= required_keys(launcher)
