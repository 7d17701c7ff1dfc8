"""What runs is the truth, on the real control plane: a pod that claims an admitted Job (its
ownerReference, controller: true, the Job's uid) but was made by a user runs beyond the Job's
admission. The webhook is down (or the path is one nobody listed): the controller's
enforcement loop still sees three pods on a two-pod admission, evicts the Workload with
PodsExceedAdmission, names the pod in a Warning Event, and the Job is requeued as usual."""

from __future__ import annotations

import json
from typing import Any

from e2e.harness import (
    ControllerProcess,
    admitted,
    apply,
    condition,
    controller,
    get,
    gpu_job,
    one_queue,
    running_pods,
    unregister_webhooks,
    wait_for,
    workload_of,
)
from queuectl.api import names
from queuectl.testenv.cluster import Cluster
from queuectl.testenv.pytest_plugin import StandardFleet

__all__ = ["controller"]

GPU = names.GPU_RESOURCE


def claiming_pod(namespace: str, job: dict[str, Any], node: str) -> dict[str, Any]:
    """A bare 2-GPU pod, no gate and no queue label, bound to `node`, claiming `job`."""
    gpus = {GPU: "2"}
    meta = job["metadata"]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "extra",
            "namespace": namespace,
            "ownerReferences": [
                {
                    "apiVersion": "batch/v1",
                    "kind": "Job",
                    "name": meta["name"],
                    "uid": meta["uid"],
                    "controller": True,
                }
            ],
        },
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


def events_about(cluster: Cluster, namespace: str, name: str) -> list[dict[str, Any]]:
    out = cluster.kubectl("get", "events.events.k8s.io", "-n", namespace, "-o", "json").stdout
    return [e for e in json.loads(out)["items"] if (e.get("regarding") or {}).get("name") == name]


def test_a_user_pod_claiming_an_admitted_job_evicts_it(
    control_plane: Cluster,
    namespace: str,
    gpu_nodes: StandardFleet,
    controller: ControllerProcess,
) -> None:
    one_queue(control_plane, namespace, 8)
    apply(control_plane, gpu_job("train", namespace, "lq", pods=2, gpus=2))
    pods = wait_for(
        "2 pods running",
        lambda: len(p := running_pods(control_plane, namespace, "train")) == 2 and p,
    )
    wl = workload_of(control_plane, namespace, "train")
    assert wl is not None
    job = get(control_plane, "job", "train", namespace)

    unregister_webhooks(control_plane)  # the webhook is down: only the enforcement loop is left
    apply(control_plane, claiming_pod(namespace, job, pods[0]["spec"]["nodeName"]))

    def evicted() -> dict[str, Any] | None:
        now = get(control_plane, "workload", wl["metadata"]["name"], namespace)
        cond = condition(now, names.COND_EVICTED) or {}
        return cond if cond.get("reason") == names.REASON_EVICTED_PODS_EXCEED_ADMISSION else None

    cond = wait_for("the Workload evicted for its pods", evicted)
    assert "extra" in cond["message"], cond
    said = wait_for(
        "a Warning Event naming the pod",
        lambda: [
            e
            for e in events_about(control_plane, namespace, wl["metadata"]["name"])
            if e.get("reason") == names.EVENT_PODS_EXCEED_ADMISSION
        ],
    )
    assert said[0]["type"] == "Warning" and "extra" in said[0]["note"], said
    assert "3 pods run, 2 admitted" in said[0]["note"], said
    assert 'queuectl_pods_exceed_admission_total{cluster_queue="cq-' in controller.metrics()

    # Requeued as for any eviction: once the extra pod is gone, the Job runs again, as admitted.
    control_plane.kubectl("delete", "pod", "extra", "-n", namespace, "--wait=true")
    wait_for("the Job admitted again", lambda: admitted(control_plane, namespace, "train"), 120)
    wait_for(
        "2 pods running again", lambda: len(running_pods(control_plane, namespace, "train")) == 2
    )
