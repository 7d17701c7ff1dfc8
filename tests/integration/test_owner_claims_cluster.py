"""Ownership is verified, not claimed, on the real control plane.

A Job whose ownerReference names a JobSet (a registered kind) used to pass both job webhooks
untouched: created unsuspended, it ran 4 pods of 8 GPUs on a queue of 8. The claimed owner does
not exist, so the claim is no owner: the Job is queued like any other, created suspended.

The API server's garbage collector deletes a dependent whose owner is gone (once the JobSet CRD
is served, as after the operator tests), so the create is judged with a server-side dry run
(every webhook runs, nothing is stored), and the claim on an update on a Job that stays.
"""

from __future__ import annotations

import json

from e2e.harness import ControllerProcess, apply, controller, get, gpu_job, one_queue
from queuectl.api import names
from queuectl.testenv.cluster import Cluster
from queuectl.testenv.pytest_plugin import StandardFleet

__all__ = ["controller"]

GHOST = {
    "apiVersion": "jobset.x-k8s.io/v1alpha2",
    "kind": "JobSet",
    "name": "ghost",
    "uid": "00000000-0000-4000-8000-000000000001",
    "controller": True,
}


def test_a_job_claiming_a_jobset_that_does_not_exist_is_queued_like_any_other(
    control_plane: Cluster, namespace: str, gpu_nodes: StandardFleet, controller: ControllerProcess
) -> None:
    one_queue(control_plane, namespace, 8)
    job = gpu_job("forged", namespace, "lq", pods=4, gpus=8)
    job["metadata"]["ownerReferences"] = [GHOST]
    job["spec"]["suspend"] = False
    dry = control_plane.kubectl(
        "create", "--dry-run=server", "-o", "json", "-f", "-", input=json.dumps(job)
    )
    created = json.loads(dry.stdout)
    assert created["spec"]["suspend"] is True, "passed through as a JobSet's child: it runs"
    assert created["metadata"]["labels"][names.LABEL_CLUSTER_QUEUE] == f"cq-{namespace}"

    del job["metadata"]["ownerReferences"]
    apply(control_plane, job)
    assert get(control_plane, "job", "forged", namespace)["spec"]["suspend"] is True
    claim = {"metadata": {"ownerReferences": [GHOST]}, "spec": {"suspend": False}}
    unsuspend = ["patch", "job", "forged", "-n", namespace, "--type=merge"]
    done = control_plane.kubectl(*unsuspend, "-p", json.dumps(claim), check=False)
    assert done.returncode != 0 and "cannot be unsuspended by hand" in done.stderr


def test_a_bare_gpu_pod_claiming_a_queued_job_it_is_not_selected_by_is_refused(
    control_plane: Cluster, namespace: str, gpu_nodes: StandardFleet, controller: ControllerProcess
) -> None:
    """The Job controller would release it (drop its ownerReference), and it would run 8 GPUs
    outside the queue; the Job's own pods (its selector's labels) are never sent to us."""
    one_queue(control_plane, namespace, 8)
    apply(control_plane, gpu_job("train", namespace, "lq", pods=1, gpus=8))
    job = get(control_plane, "job", "train", namespace)
    uid = job["metadata"]["uid"]
    ref = {"apiVersion": "batch/v1", "kind": "Job", "name": "train", "uid": uid}
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "claims-train",
            "namespace": namespace,
            "ownerReferences": [{**ref, "controller": True}],
        },
        "spec": {
            "containers": [
                {"name": "c", "image": "x", "resources": {"limits": {names.GPU_RESOURCE: "8"}}}
            ]
        },
    }
    dry = ["create", "--dry-run=server", "-o", "json", "-f", "-"]
    refused = control_plane.kubectl(*dry, input=json.dumps(pod), check=False)
    assert refused.returncode != 0, "a forged claim on a queued Job was accepted"
    assert "Job 'train'" in refused.stderr and "selector" in refused.stderr
    pod["metadata"]["labels"] = job["spec"]["selector"]["matchLabels"]
    kept = control_plane.kubectl(*dry, input=json.dumps(pod), check=False)
    assert kept.returncode == 0, kept.stderr  # as the Job controller makes them
