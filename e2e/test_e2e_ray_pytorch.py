"""Issue 14 e2e for RayJob, RayCluster and PyTorchJob on their real operators (KubeRay
ray-operator v1.5.0, training-operator v1.8.1) and the kwok GPU fleet (a block is 4 nodes of 8
H100; a rack only 2, so a 4 x 8 GPU gang is held to one block).

A low-priority PyTorchJob runs as one gang inside a block; a high-priority RayJob preempts it
with the grace period (notice, runs on, suspended after the deadline, pods gone, templates put
back, requeued); the RayJob's cluster runs whole with the placement on every pod; when the
RayJob goes, the PyTorchJob is admitted again. Bypass attempts on these kinds are refused.
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
    condition,
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

pytestmark = [pytest.mark.operator("ray", "training-operator")]
GRACE = 6
PAUSE = "registry.k8s.io/pause:3.10"
AFFINITY = "requiredDuringSchedulingIgnoredDuringExecution"


RAYPT = "raypt"
TAINT = pool_taint(RAYPT)


@pytest.fixture(scope="module")
def pool(control_plane: Cluster) -> None:
    """The module's own 8 H100 nodes in 2 blocks x 2 racks, labelled and tainted so that only
    its flavor reaches them: on the session's shared standard fleet, other modules' pods had
    taken part of a block, and the PyTorchJob's master and workers were placed in two blocks
    (the core places each pod set in its own domain; docs/design/controller.md)."""
    control_plane.add_gpu_nodes(
        8,
        8,
        H100,
        81559,
        blocks=2,
        racks_per_block=2,
        name_prefix=RAYPT,
        labels={POOL: RAYPT},
        taints=[TAINT],
    )


@pytest.fixture(scope="module", autouse=True)
def _operators(operators: Any) -> None:
    """Before the module's controller starts: it then watches these kinds from its start
    rather than finding their CRDs on a later discovery poll."""
    operators("ray")
    operators("training-operator")


def pod(
    gpus: int = 0,
    topology_level: str | None = None,
    cpu: str = "1",
    container: str = "main",
    group: str | None = None,
) -> dict[str, Any]:
    requests = {"cpu": cpu, **({names.GPU_RESOURCE: str(gpus)} if gpus else {})}
    annotations = (
        {names.ANNOTATION_PODSET_REQUIRED_TOPOLOGY: topology_level} if topology_level else {}
    )
    if group is not None:
        annotations[names.ANNOTATION_PODSET_GROUP_NAME] = group
    return {
        "metadata": {"annotations": annotations},
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


def labels(queue: str, priority: str) -> dict[str, str]:
    return {names.LABEL_QUEUE_NAME: queue, names.LABEL_PRIORITY_CLASS: priority}


def pytorch_job(name: str, ns: str, queue: str, priority: str, workers: int) -> dict[str, Any]:
    """The operator finds the rendezvous port on the container named `pytorch` (it defaults the
    port only there); any other name leaves it failing every reconcile with "port not found".
    Master and workers name one pod-set group: the core places them in one block together."""
    template = pod(8, names.LABEL_TOPOLOGY_BLOCK, container="pytorch", group="ddp")
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": name, "namespace": ns, "labels": labels(queue, priority)},
        "spec": {
            "pytorchReplicaSpecs": {
                "Master": {"replicas": 1, "restartPolicy": "OnFailure", "template": template},
                "Worker": {
                    "replicas": workers,
                    "restartPolicy": "OnFailure",
                    "template": template,
                },
            }
        },
    }


def cluster_spec(workers: int, **group: Any) -> dict[str, Any]:
    return {
        "headGroupSpec": {"rayStartParams": {}, "template": pod()},
        "workerGroupSpecs": [
            {
                "groupName": "gpu",
                "replicas": workers,
                "minReplicas": 0,
                "maxReplicas": 4,
                "rayStartParams": {},
                "template": pod(8),
                **group,
            }
        ],
    }


def ray_job(name: str, ns: str, queue: str, priority: str, workers: int) -> dict[str, Any]:
    return {
        "apiVersion": "ray.io/v1",
        "kind": "RayJob",
        "metadata": {"name": name, "namespace": ns, "labels": labels(queue, priority)},
        "spec": {
            "entrypoint": "python -c 'print(1)'",
            "shutdownAfterJobFinishes": True,
            "rayClusterSpec": cluster_spec(workers),
        },
    }


def ray_cluster(
    name: str, ns: str, queue: str, workers: int, max_replicas: int = 4, **spec: Any
) -> dict[str, Any]:
    return {
        "apiVersion": "ray.io/v1",
        "kind": "RayCluster",
        "metadata": {"name": name, "namespace": ns, "labels": {names.LABEL_QUEUE_NAME: queue}},
        "spec": {**cluster_spec(workers, maxReplicas=max_replicas), **spec},
    }


def pool_flavor(name: str, topo: str) -> dict[str, Any]:
    return in_pool(flavor(name, H100, topology=topo), RAYPT)


def queue_setup(cluster: Cluster, ns: str, gpus: int) -> str:
    """A ClusterQueue over GPUs, CPU and memory (a RayJob's submitter asks for CPU and memory)
    on an H100 flavor with block/rack/host topology; LocalQueue `lq`; priorities low (grace)
    and high. Returns the flavor's name."""
    topo, fl = f"topo-{ns}", f"h100-{ns}"
    quota: list[dict[str, Any]] = [
        {"name": names.GPU_RESOURCE, "nominalQuota": gpus},
        {"name": "cpu", "nominalQuota": 64},
        {"name": "memory", "nominalQuota": "512Gi"},
    ]
    apply(
        cluster,
        topology(topo, names.LABEL_TOPOLOGY_BLOCK, names.LABEL_TOPOLOGY_RACK, names.LABEL_HOSTNAME),
        pool_flavor(fl, topo),
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
    return fl


def workload(cluster: Cluster, ns: str, kind: str, name: str) -> dict[str, Any] | None:
    for wl in items(cluster, WL, ns):
        for ref in wl["metadata"].get("ownerReferences") or []:
            if ref.get("kind") == kind and ref.get("name") == name:
                return wl
    return None


def admitted(cluster: Cluster, ns: str, kind: str, name: str) -> bool:
    return is_true(workload(cluster, ns, kind, name), names.COND_ADMITTED)


def running(cluster: Cluster, ns: str, selector: str) -> list[dict[str, Any]]:
    return [
        p
        for p in items(cluster, "pods", ns, "-l", selector)
        if p["status"].get("phase") == "Running" and not p["metadata"].get("deletionTimestamp")
    ]


def node_labels(cluster: Cluster, pods: list[dict[str, Any]], key: str) -> set[str]:
    return {get(cluster, "node", p["spec"]["nodeName"])["metadata"]["labels"][key] for p in pods}


def required_keys(pod_obj: dict[str, Any]) -> set[str]:
    node = (pod_obj["spec"].get("affinity") or {}).get("nodeAffinity") or {}
    terms = (node.get(AFFINITY) or {}).get("nodeSelectorTerms") or [{}]
    return {e["key"] for e in terms[0].get("matchExpressions") or []}


def test_a_rayjob_preempts_a_pytorchjob_that_stops_after_its_grace_period_and_comes_back(
    control_plane: Cluster, namespace: str, pool: None, controller: ControllerProcess
) -> None:
    ns, c = namespace, control_plane
    queue_setup(c, ns, gpus=32)
    apply(c, pytorch_job("train", ns, "lq", f"low-{ns}", workers=3))
    torch_pods = "training.kubeflow.org/job-name=train"
    wl = wait_for(
        "the PyTorchJob admitted",
        lambda: admitted(c, ns, "PyTorchJob", "train") and workload(c, ns, "PyTorchJob", "train"),
    )
    assert [(p["name"], p["count"]) for p in wl["spec"]["podSets"]] == [
        ("master", 1),
        ("worker", 3),
    ]
    asked = {"required": names.LABEL_TOPOLOGY_BLOCK, "podSetGroupName": "ddp"}
    assert [p["topologyRequest"] for p in wl["spec"]["podSets"]] == [asked, asked]
    pods = wait_for(
        "4 x 8 GPU gang running",
        lambda: len(p := running(c, ns, torch_pods)) == 4 and p,
        timeout=90,
    )
    assert len(node_labels(c, pods, names.LABEL_TOPOLOGY_BLOCK)) == 1  # the gang in one block
    for p in pods:  # the placement reached the pods the operator made
        # master and workers share the block, so each is pinned to the hosts counted for it
        assert {names.LABEL_GPU_PRODUCT, names.LABEL_TOPOLOGY_BLOCK, names.LABEL_HOSTNAME} <= (
            required_keys(p)
        )
        assert p["metadata"]["labels"][names.LABEL_WORKLOAD] == wl["metadata"]["name"]

    apply(c, ray_job("urgent", ns, "lq", f"high-{ns}", workers=2))
    rj = get(c, "rayjob", "urgent", ns)
    assert rj["spec"]["suspend"] is True  # queued: created suspended
    wait_for(
        "the PyTorchJob noticed",
        lambda: is_true(workload(c, ns, "PyTorchJob", "train"), names.COND_PREEMPTED),
    )
    noticed = time.time()
    victim = get(c, "pytorchjob", "train", ns)
    deadline = parse_time(victim["metadata"]["annotations"][names.ANNOTATION_PREEMPTION_DEADLINE])
    assert deadline is not None and deadline - noticed > GRACE / 2
    assert not victim["spec"].get("runPolicy", {}).get("suspend")
    assert len(running(c, ns, torch_pods)) == 4  # it runs on through its grace period
    assert not admitted(c, ns, "RayJob", "urgent")
    wait_for(
        "the PyTorchJob suspended after its deadline",
        lambda: get(c, "pytorchjob", "train", ns)["spec"]["runPolicy"].get("suspend"),
        timeout=GRACE + 30,
    )
    assert time.time() >= deadline - 1
    requeued = wait_for(
        "the PyTorchJob requeued",
        lambda: (
            (w := workload(c, ns, "PyTorchJob", "train")) and is_true(w, names.COND_REQUEUED) and w
        ),
        timeout=60,
    )
    assert not (requeued.get("status") or {}).get("admission")
    assert running(c, ns, torch_pods) == []
    victim = get(c, "pytorchjob", "train", ns)
    for rtype in ("Master", "Worker"):  # the injected placement was taken back out
        assert AFFINITY not in (
            (
                victim["spec"]["pytorchReplicaSpecs"][rtype]["template"]["spec"].get("affinity")
                or {}
            ).get("nodeAffinity")
            or {}
        )

    rwl = wait_for(
        "the RayJob admitted",
        lambda: admitted(c, ns, "RayJob", "urgent") and workload(c, ns, "RayJob", "urgent"),
    )
    assert [(p["name"], p["count"]) for p in rwl["spec"]["podSets"]] == [
        ("head", 1),
        ("gpu", 2),
        ("submitter", 1),
    ]
    cluster_name = wait_for(
        "KubeRay made the RayJob's cluster",
        lambda: get(c, "rayjob", "urgent", ns).get("status", {}).get("rayClusterName"),
    )
    ray_pods = wait_for(
        "head and 2 GPU workers running",
        lambda: len(p := running(c, ns, f"ray.io/cluster={cluster_name}")) == 3 and p,
        timeout=90,
    )
    for p in ray_pods:
        assert names.LABEL_GPU_PRODUCT in required_keys(p)
        assert p["metadata"]["labels"][names.LABEL_WORKLOAD] == rwl["metadata"]["name"]
    rc = get(c, "raycluster", cluster_name, ns)
    assert not rc["spec"].get("suspend")  # part of the RayJob's Workload, not queued itself
    assert workload(c, ns, "RayCluster", cluster_name) is None
    # Part of the RayJob's Workload, it runs what the RayJob says: 2 workers, not 50.
    grow = json.dumps(
        [
            {"op": "replace", "path": f"/spec/workerGroupSpecs/0/{field}", "value": 50}
            for field in ("replicas", "maxReplicas")
        ]
    )
    scaled = c.kubectl(
        "patch", "raycluster", cluster_name, "-n", ns, "--type=json", "-p", grow, check=False
    )
    assert scaled.returncode != 0 and "departs from RayJob 'urgent'" in scaled.stderr, scaled.stderr
    submitter = wait_for(
        "the submitter pod running with the placement",
        lambda: running(c, ns, "job-name=urgent"),
        timeout=90,
    )
    assert names.LABEL_GPU_PRODUCT in required_keys(submitter[0])
    assert get(c, "rayjob", "urgent", ns)["status"]["jobDeploymentStatus"] == "Running"

    c.kubectl("delete", "rayjob", "urgent", "-n", ns, "--wait=false")
    wait_for(
        "the PyTorchJob admitted again", lambda: admitted(c, ns, "PyTorchJob", "train"), timeout=90
    )
    wait_for("its gang running again", lambda: len(running(c, ns, torch_pods)) == 4, timeout=90)


def test_bypass_attempts_on_rayclusters_and_pytorchjobs_are_refused(
    control_plane: Cluster, namespace: str, pool: None, controller: ControllerProcess
) -> None:
    ns, c = namespace, control_plane
    queue_setup(c, ns, gpus=16)
    apply(c, ray_cluster("fixed", ns, "lq", workers=1))
    wait_for("RayCluster admitted", lambda: admitted(c, ns, "RayCluster", "fixed"))
    wait_for(
        "its 2 pods running", lambda: len(running(c, ns, "ray.io/cluster=fixed")) == 2, timeout=90
    )
    scale = c.kubectl(
        "patch",
        "raycluster",
        "fixed",
        "-n",
        ns,
        "--type=json",
        "-p",
        '[{"op":"replace","path":"/spec/workerGroupSpecs/0/replicas","value":3}]',
        check=False,
    )
    assert scale.returncode != 0 and "while it is admitted" in scale.stderr, scale.stderr
    # Nor may its workers move to another flavor's nodes: placement is frozen as the shape is.
    selector = {"op": "add", "path": "/spec/workerGroupSpecs/0/template/spec/nodeSelector"}
    moved = c.kubectl(
        "patch",
        "raycluster",
        "fixed",
        "-n",
        ns,
        "--type=json",
        "-p",
        json.dumps([selector | {"value": {"gpu.example.com/model": "h100"}}]),
        check=False,
    )
    assert moved.returncode != 0, "moved to other nodes while admitted"
    assert "spec.workerGroupSpecs[0].template.spec.nodeSelector" in moved.stderr, moved.stderr

    # Autoscaling: quota for maxReplicas is held, so the autoscaler moving replicas is allowed.
    elastic = ray_cluster("elastic", ns, "lq", 0, max_replicas=2, enableInTreeAutoscaling=True)
    apply(c, elastic)
    assert get(c, "raycluster", "elastic", ns)["spec"]["suspend"] is True
    apply(c, pytorch_job("waits", ns, "lq", f"low-{ns}", workers=1))
    wait_for("the PyTorchJob has a Workload", lambda: workload(c, ns, "PyTorchJob", "waits"))
    unsuspend = c.kubectl(
        "patch",
        "pytorchjob",
        "waits",
        "-n",
        ns,
        "--type=merge",
        "-p",
        '{"spec":{"runPolicy":{"suspend":false}}}',
        check=False,
    )
    assert unsuspend.returncode != 0 and "cannot be unsuspended by hand" in unsuspend.stderr
    unsuspend = c.kubectl(
        "patch",
        "raycluster",
        "elastic",
        "-n",
        ns,
        "--type=merge",
        "-p",
        '{"spec":{"suspend":false}}',
        check=False,
    )
    assert unsuspend.returncode != 0 and "RayCluster" in unsuspend.stderr
    wl = workload(c, ns, "RayCluster", "elastic")
    assert wl is not None and wl["spec"]["podSets"][1]["count"] == 2  # maxReplicas
    assert condition(wl, names.COND_ADMITTED) is None or not is_true(wl, names.COND_ADMITTED)
    c.kubectl("delete", "pytorchjob", "waits", "-n", ns, "--wait=false")
    c.kubectl("delete", "raycluster", "fixed", "-n", ns, "--wait=false")
    wait_for(
        "the autoscaling RayCluster admitted",
        lambda: admitted(c, ns, "RayCluster", "elastic"),
        timeout=60,
    )
    scaled = c.kubectl(
        "patch",
        "raycluster",
        "elastic",
        "-n",
        ns,
        "--type=json",
        "-p",
        '[{"op":"replace","path":"/spec/workerGroupSpecs/0/replicas","value":2}]',
        check=False,
    )
    assert scaled.returncode == 0, scaled.stderr  # within its admitted size: not a bypass
    wait_for(
        "2 workers scaled up",
        lambda: len(running(c, ns, "ray.io/cluster=elastic")) == 3,
        timeout=90,
    )
