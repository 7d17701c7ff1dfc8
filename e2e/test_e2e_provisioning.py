"""Issue 16, elastic capacity, for real: queued demand grows the fleet through Karpenter.

The cluster has 2 free 8-GPU nodes; a gang of 4 x 8 GPUs reserves quota in a queue whose
`provisioning` check asks for capacity with placeholder pods. Karpenter (its kwok provider, built
from sigs.k8s.io/karpenter and run as a process) sees them pending, adds 2 nodes from a NodePool
whose nodes carry the GPU labels and one rack label; the check turns Ready, the gang is admitted
whole and runs on the 2 old + 2 new nodes. Once it finished and the new nodes are empty,
Karpenter consolidates them away. Demand the quota does not allow never asks for anything.

The pool is the module's own: its nodes (old and new) carry a pool label and a taint that only
this module's flavor tolerates. The control plane is shared by the whole session, and other
modules leave free H100 nodes behind: with a flavor over every H100 the check rightly found the
gang fitting there and asked for nothing (a CI failure), and an H100 pod pending elsewhere could
make Karpenter grow this pool.
"""

from __future__ import annotations

import time
from typing import Any

import pytest

from e2e.harness import (
    POOL,
    ControllerProcess,
    apply,
    cluster_queue,
    flavor,
    gpu_job,
    in_pool,
    is_true,
    items,
    local_queue,
    pool_taint,
    running_pods,
    wait_for,
    workload_of,
)
from queuectl.api import names
from queuectl.testenv import karpenter
from queuectl.testenv.cluster import Cluster

pytestmark = pytest.mark.operator("karpenter")

PRODUCT = "NVIDIA-H100-80GB-HBM3"  # the NodePool's nodes carry it as GFD would
NODE_POOL = "gpu-h100"
NODEPOOL_LABEL = "karpenter.sh/nodepool"
CHECK = "capacity"
GROWN = "grown"
TAINT = pool_taint(GROWN)


def provisioning_check() -> dict[str, Any]:
    return {
        "apiVersion": names.API_VERSION,
        "kind": "AdmissionCheck",
        "metadata": {"name": CHECK},
        "spec": {"controllerName": names.CHECK_PROVISIONING},
    }


def pool_flavor() -> dict[str, Any]:
    """A flavor over just this module's pool: its label, and a toleration of its taint."""
    return in_pool(flavor(f"h100-{GROWN}", PRODUCT), GROWN)


def gated_queue(cluster: Cluster, namespace: str, gpus: int) -> None:
    cq = f"cq-{namespace}"
    apply(
        cluster,
        provisioning_check(),
        pool_flavor(),
        cluster_queue(cq, namespace, {f"h100-{GROWN}": gpus}, admissionChecks=[CHECK]),
        local_queue("lq", namespace, cq),
    )


def karpenter_nodes(cluster: Cluster) -> list[dict[str, Any]]:
    return items(cluster, "nodes", "", "-l", NODEPOOL_LABEL)


def node_claims(cluster: Cluster) -> list[dict[str, Any]]:
    return items(cluster, "nodeclaims.karpenter.sh", "")


def placeholders(cluster: Cluster, namespace: str) -> list[dict[str, Any]]:
    return items(cluster, "pods", namespace, "-l", names.LABEL_PLACEHOLDER_FOR)


@pytest.fixture(scope="module")
def grown_cluster(control_plane: Cluster, operators: Any) -> Cluster:
    """2 free 8-GPU nodes of the product, Karpenter running with a NodePool for more; all of
    them labelled and tainted as this module's pool."""
    control_plane.add_gpu_nodes(
        2, 8, PRODUCT, 81559, name_prefix="base", labels={POOL: GROWN}, taints=[TAINT]
    )
    operators("karpenter")
    apply(
        control_plane,
        karpenter.node_pool(
            NODE_POOL,
            product=PRODUCT,
            consolidate_after="10s",
            labels={POOL: GROWN},
            taints=[TAINT],
        ),
    )
    return control_plane


def test_demand_the_quota_does_not_allow_never_provisions_anything(
    grown_cluster: Cluster, controller: ControllerProcess, namespace: str
) -> None:
    gated_queue(grown_cluster, namespace, gpus=8)
    apply(grown_cluster, gpu_job("too-big", namespace, "lq", pods=4, gpus=8))
    wait_for("its Workload", lambda: workload_of(grown_cluster, namespace, "too-big"))
    time.sleep(15)  # Karpenter batches pending pods for up to 10 s: give it longer than that
    wl = workload_of(grown_cluster, namespace, "too-big")
    assert wl is not None and not is_true(wl, names.COND_QUOTA_RESERVED)
    assert placeholders(grown_cluster, namespace) == []
    assert node_claims(grown_cluster) == [] and karpenter_nodes(grown_cluster) == []


def test_a_gang_bigger_than_the_free_nodes_grows_the_fleet_and_it_shrinks_after(
    grown_cluster: Cluster, controller: ControllerProcess, namespace: str
) -> None:
    gated_queue(grown_cluster, namespace, gpus=32)
    started = time.monotonic()
    apply(grown_cluster, gpu_job("gang", namespace, "lq", pods=4, gpus=8, runs_for="20s"))

    def asked() -> list[dict[str, Any]]:
        return placeholders(grown_cluster, namespace)

    shown = wait_for("4 placeholder pods", lambda: len(asked()) == 4 and asked(), timeout=60)
    for pod in shown:
        assert pod["spec"]["priorityClassName"] == names.PRIORITY_CLASS_PLACEHOLDER
        requests = pod["spec"]["containers"][0]["resources"]["requests"]
        assert requests[names.GPU_RESOURCE] == "8"
    wl = workload_of(grown_cluster, namespace, "gang")
    assert wl is not None and not is_true(wl, names.COND_ADMITTED)  # reserved, not admitted

    def admitted() -> bool:
        got = workload_of(grown_cluster, namespace, "gang")
        return got is not None and is_true(got, names.COND_ADMITTED)

    wait_for("the gang admitted once Karpenter's nodes are there", admitted, timeout=240)
    admitted_after = time.monotonic() - started
    new = karpenter_nodes(grown_cluster)
    assert len(new) == 2, [n["metadata"]["name"] for n in new]
    racks = {n["metadata"]["labels"].get(karpenter.RACK_LABEL) for n in new}
    assert racks == {"rack-k1"}  # one topology domain
    assert all(n["metadata"]["labels"][names.LABEL_GPU_PRODUCT] == PRODUCT for n in new)
    pods = wait_for(
        "all 4 pods running",
        lambda: (
            len(running_pods(grown_cluster, namespace, "gang")) == 4
            and running_pods(grown_cluster, namespace, "gang")
        ),
        timeout=90,
    )
    on = {p["spec"]["nodeName"] for p in pods}
    assert len(on) == 4 and {n["metadata"]["name"] for n in new} <= on
    assert placeholders(grown_cluster, namespace) == []
    wl = workload_of(grown_cluster, namespace, "gang")
    assert wl is not None
    (entry,) = wl["status"]["admissionChecks"]
    assert entry["state"] == "Ready" and "placeholder" in entry["message"]
    scraped = controller.metrics()
    assert 'queuectl_provision_decisions_total{mode="placeholders",outcome="Provisioned"} 1.0' in (
        scraped
    )
    assert "queuectl_reservation_to_admission_seconds_count" in scraped

    wait_for(
        "the gang finished",
        lambda: is_true(workload_of(grown_cluster, namespace, "gang"), names.COND_FINISHED),
        timeout=120,
    )
    finished = time.monotonic()
    wait_for(
        "Karpenter removed its idle nodes",
        lambda: not karpenter_nodes(grown_cluster) and not node_claims(grown_cluster),
        timeout=240,
        interval=2,
    )
    print(
        f"\nreservation..admission {admitted_after:.0f}s after submit; idle nodes gone "
        f"{time.monotonic() - finished:.0f}s after the gang finished"
    )
