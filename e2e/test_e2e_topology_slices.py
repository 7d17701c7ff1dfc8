"""Sliced and balanced gangs on the real control plane, placed by the real kube-scheduler.

A pool of its own (e2e/slice_pool.py): one block, three racks of four 8-GPU nodes, each pair of
nodes one NVLink domain. A 64-GPU Indexed Job (8 pods x 8 GPUs) asks for slices of 4 pods per
rack, each in slices of 2 per NVLink domain, all in the block: every pod lands on the node the
core chose for its index (the pod webhook pins it), so pods [4k, 4k+4) share a rack and pods
[2j, 2j+2) an NVLink domain, as the job's ranks expect. Without the pins the scheduler splits
them. A balanced 6-pod gang then spreads 3 and 3 over two racks where best fit packs 4 and 2.
"""

from __future__ import annotations

import json
import time
from typing import Any

from e2e.harness import (
    ControllerProcess,
    apply,
    get,
    gpu_job,
    items,
    pods_of,
    wait_for,
    workload_of,
)
from e2e.slice_pool import BLOCK, CLIQUE, RACK, assert_slices, assigned_nodes, placed, sliced_pool
from queuectl.api import names
from queuectl.testenv.cluster import Cluster


def indexed_job(name: str, namespace: str, pods: int, annotations: dict[str, str]) -> Any:
    job = gpu_job(name, namespace, "lq", pods=pods, annotations=annotations)
    job["spec"]["completionMode"] = "Indexed"
    return job


def index(pod: dict[str, Any]) -> int:
    return int(pod["metadata"]["labels"][names.LABEL_JOB_COMPLETION_INDEX])


def test_a_64_gpu_gang_in_slices_lands_slice_by_slice_on_the_nodes_the_core_chose(
    control_plane: Cluster, namespace: str, controller: ControllerProcess
) -> None:
    sliced_pool(control_plane, namespace, f"sl{int(time.time()) % 100000}")
    slices = {
        names.ANNOTATION_PODSET_REQUIRED_TOPOLOGY: BLOCK,
        names.ANNOTATION_PODSET_SLICE_REQUIRED_TOPOLOGY: f"{RACK},{CLIQUE}",
        names.ANNOTATION_PODSET_SLICE_SIZE: "4,2",
    }
    apply(control_plane, indexed_job("gang", namespace, 8, slices))
    at = placed(control_plane, lambda: pods_of(control_plane, namespace, "gang"), 8, index)
    assert_slices(at, (RACK, 4), (CLIQUE, 2))
    wl = workload_of(control_plane, namespace, "gang")
    assert wl is not None
    assert [at[i][names.LABEL_HOSTNAME] for i in range(8)] == assigned_nodes(wl)
    # The pins travel on the template (the controller's) and become each pod's own affinity.
    job = get(control_plane, "job", "gang", namespace)
    pins = json.loads(job["spec"]["template"]["metadata"]["annotations"][names.ANNOTATION_POD_PINS])
    assert sum(entry[0] for entry in pins["pods"]) == 8

    # Gone, and a balanced gang of 6 takes the two largest racks: 3 and 3, not 4 and 2.
    control_plane.kubectl("delete", "job", "gang", "-n", namespace, "--wait=false")
    wait_for("the gang's pods gone", lambda: not items(control_plane, "pods", namespace))
    balanced = {
        names.ANNOTATION_PODSET_REQUIRED_TOPOLOGY: BLOCK,
        names.ANNOTATION_PODSET_BALANCED_PLACEMENT: "true",
    }
    apply(control_plane, indexed_job("even", namespace, 6, balanced))
    at = placed(control_plane, lambda: pods_of(control_plane, namespace, "even"), 6, index)
    per_rack: dict[str, int] = {}
    for labels in at.values():
        per_rack[labels[RACK]] = per_rack.get(labels[RACK], 0) + 1
    assert sorted(per_rack.values()) == [3, 3], per_rack
    wl = workload_of(control_plane, namespace, "even")
    assert wl is not None
    assert [at[i][names.LABEL_HOSTNAME] for i in range(6)] == assigned_nodes(wl)
