"""Issue 16, GPU sharing, on the real control plane: MIG slices and time-sliced GPUs.

kwok nodes advertise what the NVIDIA device plugin would (mixed-strategy MIG:
`nvidia.com/mig-3g.40gb`, no `nvidia.com/gpu`; time-slicing: `nvidia.com/gpu` = GPUs x
replicas), and the real kube-scheduler binds the pods. What only a real API server can show:
that a suspended Job admitted to a `gpuResource` flavor accepts the controller's rewrite of its
containers to the slice (MutablePodResourcesForSuspendedJobs), that the pod then fits only a
node with the slice, and that a requeue can write the user's `nvidia.com/gpu` back.

The pool is the module's own (a label per kind of node, one taint that only these flavors
tolerate): other modules leave free H100 nodes in the shared session control plane.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from e2e.harness import (
    POOL,
    ControllerProcess,
    admitted,
    apply,
    cluster_queue,
    get,
    gpu_job,
    local_queue,
    running_pods,
    wait_for,
    workload_of,
)
from queuectl.api import names
from queuectl.cli.main import main as cli_main
from queuectl.testenv.cluster import Cluster
from queuectl.testenv.nodes import H100

MIG_3G = "nvidia.com/mig-3g.40gb"
GPU = names.GPU_RESOURCE
FULL, MIG, SHARED = "gs-full", "gs-mig", "gs-shared"  # node prefixes, pool labels, flavors
TAINT = {"key": POOL, "value": "gpu-sharing", "effect": "NoSchedule"}
TOLERATION = {**TAINT, "operator": "Equal"}


@pytest.fixture(scope="module")
def pool(control_plane: Cluster, controller: ControllerProcess) -> Iterator[Cluster]:
    """One node of 2 whole GPUs, one of 2 GPUs cut into 3g.40gb slices (2 per GPU: 4), one
    GPU time-sliced 4 ways; a flavor over each (the controller installs the CRDs)."""
    for prefix, extra in (
        (FULL, {}),
        (MIG, {"mig_layout": "all-3g.40gb"}),
        (SHARED, {"replicas": 4}),
    ):
        gpus = 1 if prefix == SHARED else 2
        control_plane.add_gpu_nodes(
            1, gpus, H100, name_prefix=prefix, labels={POOL: prefix}, taints=[TAINT], **extra
        )
    apply(
        control_plane,
        pool_flavor(FULL, {names.LABEL_GPU_PRODUCT: H100}),
        pool_flavor(MIG, {names.LABEL_MIG_STRATEGY: "mixed"}, gpu_resource=MIG_3G),
        pool_flavor(SHARED, {names.LABEL_GPU_SHARING_STRATEGY: "time-slicing"}),
    )
    yield control_plane
    mine = f"{POOL} in ({FULL},{MIG},{SHARED})"  # other modules' pools carry POOL too
    control_plane.kubectl("delete", "node", "-l", mine, "--wait=false")


def pool_flavor(
    name: str, labels: dict[str, str], gpu_resource: str | None = None
) -> dict[str, Any]:
    spec: dict[str, Any] = {"nodeLabels": {POOL: name, **labels}, "tolerations": [TOLERATION]}
    if gpu_resource:
        spec["gpuResource"] = gpu_resource
    return {
        "apiVersion": names.API_VERSION,
        "kind": "ResourceFlavor",
        "metadata": {"name": name},
        "spec": spec,
    }


def queue(cluster: Cluster, namespace: str, cq: dict[str, Any]) -> None:
    apply(cluster, cq, local_queue("lq", namespace, cq["metadata"]["name"]))


def job_asking(name: str, namespace: str, resource: str) -> dict[str, Any]:
    """One pod asking one `resource` (nvidia.com/gpu, or a slice by its own name)."""
    job = gpu_job(name, namespace, "lq", gpus=1)
    res = job["spec"]["template"]["spec"]["containers"][0]["resources"]
    for part in ("requests", "limits"):
        res[part] = {resource: "1"}
    return job


def container_resources(cluster: Cluster, namespace: str, job: str) -> dict[str, Any]:
    j = get(cluster, "job", job, namespace)
    found: dict[str, Any] = j["spec"]["template"]["spec"]["containers"][0]["resources"]
    return found


def template_annotations(cluster: Cluster, namespace: str, job: str) -> dict[str, str]:
    meta = get(cluster, "job", job, namespace)["spec"]["template"].get("metadata") or {}
    return dict(meta.get("annotations") or {})


def admitted_flavor(cluster: Cluster, namespace: str, job: str) -> str:
    wl = workload_of(cluster, namespace, job) or {}
    [psa] = wl["status"]["admission"]["podSetAssignments"]
    return str(next(iter(psa["flavors"].values())))


def runs_on(cluster: Cluster, namespace: str, job: str) -> str:
    """Wait for the job's one pod to run; the node the kube-scheduler bound it to."""
    [pod] = wait_for(f"{job} running", lambda: running_pods(cluster, namespace, job), 60)
    return str(pod["spec"]["nodeName"])


def stop(cluster: Cluster, namespace: str, policy: str) -> None:
    """The LocalQueue's stopPolicy (HoldAndDrain evicts what it admitted; None resumes)."""
    patch = json.dumps({"spec": {"stopPolicy": policy}})
    cluster.kubectl("patch", "localqueue", "lq", "-n", namespace, "--type=merge", "-p", patch)


def test_a_job_asking_for_a_slice_runs_on_the_mig_node(
    pool: Cluster, controller: ControllerProcess, namespace: str
) -> None:
    cq = cluster_queue(f"cq-{namespace}", namespace, {})
    cq["spec"]["resourceGroups"] = [
        {
            "coveredResources": [MIG_3G],
            "flavors": [{"name": MIG, "resources": [{"name": MIG_3G, "nominalQuota": 1}]}],
        }
    ]
    queue(pool, namespace, cq)
    apply(pool, job_asking("slice", namespace, MIG_3G))

    assert runs_on(pool, namespace, "slice") == f"{MIG}-0"
    assert admitted_flavor(pool, namespace, "slice") == MIG
    # asked by its own name: nothing to rename
    assert container_resources(pool, namespace, "slice")["requests"] == {MIG_3G: "1"}
    assert names.ANNOTATION_GPU_RESOURCE not in template_annotations(pool, namespace, "slice")


def test_whole_gpus_first_then_a_slice_the_api_server_accepts_the_rewrite(
    pool: Cluster,
    controller: ControllerProcess,
    namespace: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    queue(pool, namespace, cluster_queue(f"cq-{namespace}", namespace, {FULL: 2, MIG: 1}))
    for name in ("whole-a", "whole-b"):
        apply(pool, job_asking(name, namespace, GPU))
        assert runs_on(pool, namespace, name) == f"{FULL}-0"
        assert admitted_flavor(pool, namespace, name) == FULL
        assert container_resources(pool, namespace, name)["requests"] == {GPU: "1"}

    apply(pool, job_asking("fallback", namespace, GPU))
    node = runs_on(pool, namespace, "fallback")

    assert node == f"{MIG}-0"  # bound where the slice is: the MIG node has no nvidia.com/gpu
    assert admitted_flavor(pool, namespace, "fallback") == MIG
    assert container_resources(pool, namespace, "fallback") == {
        "requests": {MIG_3G: "1"},
        "limits": {MIG_3G: "1"},
    }
    annotations = template_annotations(pool, namespace, "fallback")
    assert annotations[names.ANNOTATION_GPU_RESOURCE] == MIG_3G
    [pod] = running_pods(pool, namespace, "fallback")
    assert pod["spec"]["containers"][0]["resources"]["requests"] == {MIG_3G: "1"}
    # the Workload keeps the user's shape: quota is counted in nvidia.com/gpu of the MIG flavor
    wl = workload_of(pool, namespace, "fallback") or {}
    user = wl["spec"]["podSets"][0]["template"]["spec"]["containers"][0]["resources"]
    assert user["requests"] == {GPU: "1"}
    argv = ["describe", "job", "fallback", "-n", namespace, "--kubeconfig", pool.kubeconfig]
    assert cli_main(argv) == 0
    [row] = [line for line in capsys.readouterr().out.splitlines() if "gpu=1" in line]
    assert MIG in row.split(), row  # describe names the slice's flavor for the pod set


def test_a_drained_slice_job_gets_its_gpu_request_back_and_is_rewritten_again(
    pool: Cluster, controller: ControllerProcess, namespace: str
) -> None:
    queue(pool, namespace, cluster_queue(f"cq-{namespace}", namespace, {MIG: 1}))
    apply(pool, job_asking("infer", namespace, GPU))
    assert runs_on(pool, namespace, "infer") == f"{MIG}-0"
    assert container_resources(pool, namespace, "infer")["requests"] == {MIG_3G: "1"}

    stop(pool, namespace, "HoldAndDrain")
    wait_for(
        "the user's containers back while it waits",
        lambda: (
            container_resources(pool, namespace, "infer")["requests"] == {GPU: "1"}
            and not admitted(pool, namespace, "infer")
        ),
        60,
    )
    assert container_resources(pool, namespace, "infer")["limits"] == {GPU: "1"}
    assert names.ANNOTATION_GPU_RESOURCE not in template_annotations(pool, namespace, "infer")
    assert get(pool, "job", "infer", namespace)["spec"]["suspend"] is True
    assert not running_pods(pool, namespace, "infer")

    stop(pool, namespace, "None")
    assert runs_on(pool, namespace, "infer") == f"{MIG}-0"
    assert container_resources(pool, namespace, "infer")["requests"] == {MIG_3G: "1"}


def test_a_time_sliced_gpu_runs_as_many_pods_as_its_replicas(
    pool: Cluster, controller: ControllerProcess, namespace: str
) -> None:
    queue(pool, namespace, cluster_queue(f"cq-{namespace}", namespace, {SHARED: 4}))
    jobs = [f"share-{i}" for i in range(4)]
    apply(pool, *(job_asking(name, namespace, GPU) for name in jobs))

    nodes = {runs_on(pool, namespace, name) for name in jobs}

    assert nodes == {f"{SHARED}-0"}  # four pods on one physical GPU
    node = get(pool, "node", f"{SHARED}-0")
    assert node["status"]["allocatable"][GPU] == "4"
    assert node["metadata"]["labels"][names.LABEL_GPU_REPLICAS] == "4"
