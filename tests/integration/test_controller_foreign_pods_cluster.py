"""Pods outside queuectl hold GPUs too: on the real control plane, a plain pod holding a node's
8 GPUs keeps a rack-bound gang waiting instead of admitting it onto GPUs that are taken; when
the pod goes, the gang is admitted whole."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from e2e.harness import (
    ControllerProcess,
    admitted,
    apply,
    cluster_queue,
    controller,
    flavor,
    gpu_job,
    local_queue,
    running_pods,
    topology,
    wait_for,
    wait_for_pending_reason,
)
from queuectl.api import names
from queuectl.testenv.cluster import Cluster

__all__ = ["controller"]


@pytest.fixture
def rack(control_plane: Cluster, namespace: str) -> Iterator[tuple[str, list[str]]]:
    """Two 8-GPU nodes of a product no other test selects, in one rack; removed afterwards."""
    product = f"NVIDIA-TEST-{namespace[-6:]}"
    nodes = control_plane.add_gpu_nodes(2, product=product, name_prefix=f"fp-{namespace[-6:]}")
    try:
        yield product, [n.name for n in nodes]
    finally:
        control_plane.kubectl("delete", "node", *[n.name for n in nodes], "--ignore-not-found")


def notebook(namespace: str, node: str) -> dict[str, Any]:
    """A pod nobody queued, bound straight to `node`, holding all 8 of its GPUs."""
    gpus = {names.GPU_RESOURCE: "8"}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "notebook", "namespace": namespace},
        "spec": {
            "nodeName": node,
            "terminationGracePeriodSeconds": 0,
            "tolerations": [{"operator": "Exists"}],
            "containers": [
                {
                    "name": "main",
                    "image": "registry.k8s.io/pause:3.10",
                    "resources": {"requests": gpus, "limits": gpus},
                }
            ],
        },
    }


def test_a_pod_outside_queuectl_keeps_a_gang_off_its_gpus_until_it_goes(
    control_plane: Cluster,
    namespace: str,
    rack: tuple[str, list[str]],
    controller: ControllerProcess,
) -> None:
    product, nodes = rack
    topo = f"topo-{namespace}"
    fl = f"fp-{namespace}"
    cq = f"cq-{namespace}"
    apply(
        control_plane,
        topology(topo, names.LABEL_TOPOLOGY_RACK, names.LABEL_HOSTNAME),
        flavor(fl, product, topology=topo),
        cluster_queue(cq, namespace, {fl: 16}),
        local_queue("lq", namespace, cq),
        notebook(namespace, nodes[0]),
    )
    wait_for(
        "the notebook running",
        lambda: (
            control_plane.kubectl(
                "get", "pod", "notebook", "-n", namespace, "-o", "jsonpath={.status.phase}"
            ).stdout
            == "Running"
        ),
    )
    gang = gpu_job(
        "gang",
        namespace,
        "lq",
        pods=2,
        gpus=8,
        annotations={names.ANNOTATION_PODSET_REQUIRED_TOPOLOGY: names.LABEL_TOPOLOGY_RACK},
    )
    apply(control_plane, gang)
    _, message = wait_for_pending_reason(
        control_plane, namespace, "gang", names.REASON_TOPOLOGY_PLACEMENT_FAILED
    )
    assert "the largest holds 1" in message, message
    assert not admitted(control_plane, namespace, "gang")

    control_plane.kubectl("delete", "pod", "notebook", "-n", namespace, "--wait=true")
    wait_for("the gang admitted", lambda: admitted(control_plane, namespace, "gang"))
    pods = wait_for(
        "2 gang pods running",
        lambda: len(p := running_pods(control_plane, namespace, "gang")) == 2 and p,
    )
    assert sorted(p["spec"]["nodeName"] for p in pods) == sorted(nodes)
