"""A sliced JobSet on the real control plane with the real JobSet operator (v0.11.0).

The pins reach a JobSet's pods the long way: queuectl writes them on the replicated job's pod
template while the JobSet is suspended, JobSet copies template annotations onto its child Jobs
on resume, the Job controller onto the pods, and the pod webhook turns each pod's child-Job
index and completion index into its pin. Four child Jobs of two 8-GPU pods, slices of 2 per
NVLink domain and 4 per rack: each child Job's pods share an NVLink domain, each pair of child
Jobs a rack, each pod on the node the core chose for it.
"""

from __future__ import annotations

import time
from typing import Any

import pytest

from e2e.harness import ControllerProcess, apply, items, wait_for
from e2e.slice_pool import BLOCK, CLIQUE, RACK, assert_slices, assigned_nodes, placed, sliced_pool
from queuectl.api import names
from queuectl.testenv.cluster import Cluster

pytestmark = pytest.mark.operator("jobset")

POD_LABEL = "jobset.sigs.k8s.io/jobset-name"


@pytest.fixture(scope="module")
def jobset_operator(operators: Any) -> None:
    operators("jobset")


@pytest.fixture(scope="module")
def queued(jobset_operator: None, controller: ControllerProcess) -> ControllerProcess:
    """The controller, started once the JobSet CRD is served (so it watches JobSets at once)."""
    return controller


def sliced_jobset(name: str, namespace: str) -> dict[str, Any]:
    gpus = {names.GPU_RESOURCE: "8"}
    annotations = {
        names.ANNOTATION_PODSET_REQUIRED_TOPOLOGY: BLOCK,
        names.ANNOTATION_PODSET_SLICE_REQUIRED_TOPOLOGY: f"{RACK},{CLIQUE}",
        names.ANNOTATION_PODSET_SLICE_SIZE: "4,2",
    }
    pod = {
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
    }
    job = {"parallelism": 2, "completions": 2, "backoffLimit": 0, "template": pod}
    return {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {names.LABEL_QUEUE_NAME: "lq"},
        },
        "spec": {"replicatedJobs": [{"name": "workers", "replicas": 4, "template": {"spec": job}}]},
    }


def index(pod: dict[str, Any]) -> int:
    labels = pod["metadata"]["labels"]
    return int(labels[names.LABEL_JOBSET_JOB_INDEX]) * 2 + int(
        labels[names.LABEL_JOB_COMPLETION_INDEX]
    )


def test_a_sliced_jobsets_pods_land_slice_by_slice_through_its_child_jobs(
    control_plane: Cluster, namespace: str, queued: ControllerProcess
) -> None:
    sliced_pool(control_plane, namespace, f"js{int(time.time()) % 100000}")
    apply(control_plane, sliced_jobset("gang", namespace))

    def pods() -> list[dict[str, Any]]:
        return items(control_plane, "pods", namespace, "-l", f"{POD_LABEL}=gang")

    at = placed(control_plane, pods, 8, index)
    assert_slices(at, (RACK, 4), (CLIQUE, 2))
    wl = wait_for(
        "the JobSet's Workload",
        lambda: next(
            (
                w
                for w in items(control_plane, "workloads.queuectl.io", namespace)
                if any(
                    r.get("kind") == "JobSet" for r in w["metadata"].get("ownerReferences") or []
                )
            ),
            None,
        ),
    )
    assert [at[i][names.LABEL_HOSTNAME] for i in range(8)] == assigned_nodes(wl)
