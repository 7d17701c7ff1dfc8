"""LeaderWorkerSet on the real control plane with the real lws v0.7.0 operator: each replica
(a leader and its workers) is one pod group, admitted whole inside one rack; a replica's pods
are gated until then; lifting a gate by hand is refused."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest

from e2e.harness import (
    WL,
    ControllerProcess,
    apply,
    cluster_queue,
    flavor,
    get,
    gpu_job,
    is_true,
    items,
    local_queue,
    priority_class,
    rack_pool,
    running_pods,
    wait_for,
)
from queuectl.api import names
from queuectl.jobs import podgroup as pg
from queuectl.testenv.cluster import Cluster
from queuectl.testenv.nodes import H100
from queuectl.testenv.pytest_plugin import StandardFleet

GRACE = 6


def gpu_template(role: str, gpus: int) -> dict[str, Any]:
    return {
        "metadata": {
            "annotations": {names.ANNOTATION_PODSET_REQUIRED_TOPOLOGY: names.LABEL_TOPOLOGY_RACK}
        },
        "spec": {
            "terminationGracePeriodSeconds": 0,
            "containers": [
                {
                    "name": role,
                    "image": "registry.k8s.io/pause:3.10",
                    "resources": {"limits": {names.GPU_RESOURCE: str(gpus)}},
                }
            ],
        },
    }


def leader_worker_set(name: str, namespace: str, replicas: int, size: int) -> dict[str, Any]:
    return {
        "apiVersion": "leaderworkerset.x-k8s.io/v1",
        "kind": "LeaderWorkerSet",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {names.LABEL_QUEUE_NAME: "lq"},
        },
        "spec": {
            "replicas": replicas,
            "leaderWorkerTemplate": {
                "size": size,
                "leaderTemplate": gpu_template("leader", 8),
                "workerTemplate": gpu_template("worker", 8),
            },
        },
    }


def lws_pods(cluster: Cluster, namespace: str, name: str) -> list[dict[str, Any]]:
    return items(cluster, "pods", namespace, "-l", f"{pg.LWS_NAME}={name}")


def rack_of(cluster: Cluster, pod: dict[str, Any]) -> str:
    node = get(cluster, "node", pod["spec"]["nodeName"])
    return str(node["metadata"]["labels"][names.LABEL_TOPOLOGY_RACK])


@pytest.mark.operator("lws")
def test_each_lws_replica_is_a_4x8_gpu_gang_admitted_whole_in_one_rack(
    control_plane: Cluster,
    namespace: str,
    operators: Callable[[str], None],
    controller: ControllerProcess,
) -> None:
    operators("lws")
    # room for one replica at a time
    rack_pool(control_plane, namespace, f"lws{int(time.time()) % 100000}", gpus=32)
    apply(control_plane, leader_worker_set("infer", namespace, replicas=2, size=4))

    def admitted_groups() -> list[str]:
        return sorted(
            w["metadata"]["labels"][names.LABEL_POD_GROUP_NAME]
            for w in items(control_plane, WL, namespace)
            if is_true(w, names.COND_ADMITTED)
        )

    wait_for("one replica admitted", lambda: len(admitted_groups()) == 1, timeout=90)

    def running_by_group() -> dict[str, list[dict[str, Any]]]:
        out: dict[str, list[dict[str, Any]]] = {}
        for p in lws_pods(control_plane, namespace, "infer"):
            if (p.get("status") or {}).get("phase") == "Running":
                out.setdefault(p["metadata"]["labels"][names.LABEL_POD_GROUP_NAME], []).append(p)
        return out

    running = wait_for(
        "the admitted replica's 4 pods running",
        lambda: (r := running_by_group()) and len(next(iter(r.values()))) == 4 and r,
        timeout=90,
    )
    (group, pods), *_ = running.items()
    assert [group] == admitted_groups()
    assert len({rack_of(control_plane, p) for p in pods}) == 1  # whole, in one rack
    waiting = [
        p
        for p in lws_pods(control_plane, namespace, "infer")
        if p["metadata"]["labels"][names.LABEL_POD_GROUP_NAME] != group
    ]
    assert waiting and all(pg.is_gated(p) for p in waiting)  # the other replica: all gated
    wls = items(control_plane, WL, namespace)
    assert len(wls) == 2  # one Workload per replica
    # the leader asks what its workers ask: one pod set of 4, one topology request for all
    assert all([ps["count"] for ps in w["spec"]["podSets"]] == [4] for w in wls)
    done = control_plane.kubectl(
        "patch", "pod", waiting[0]["metadata"]["name"], "-n", namespace, "--type=json",
        "-p", '[{"op": "remove", "path": "/spec/schedulingGates"}]', check=False,
    )  # fmt: skip
    assert done.returncode != 0 and "lifted by queuectl" in done.stderr


@pytest.mark.operator("lws")
def test_a_preempted_lws_replica_is_stopped_after_its_grace_period_and_comes_back_gated(
    control_plane: Cluster,
    namespace: str,
    gpu_nodes: StandardFleet,
    operators: Callable[[str], None],
    controller: ControllerProcess,
) -> None:
    operators("lws")
    low, high, cq = f"low-{namespace}", f"high-{namespace}", f"cq-{namespace}"
    apply(
        control_plane,
        flavor("h100", H100),
        priority_class(low, 10, grace=GRACE),
        priority_class(high, 1000),
        cluster_queue(
            cq, namespace, {"h100": 16}, preemption={"withinClusterQueue": "LowerPriority"}
        ),
        local_queue("lq", namespace, cq),
    )
    lws = leader_worker_set("serve", namespace, replicas=1, size=2)
    lws["metadata"]["labels"][names.LABEL_PRIORITY_CLASS] = low
    for role in ("leaderTemplate", "workerTemplate"):  # no topology request here
        lws["spec"]["leaderWorkerTemplate"][role]["metadata"] = {}
    apply(control_plane, lws)

    def running() -> list[dict[str, Any]]:
        return [
            p
            for p in lws_pods(control_plane, namespace, "serve")
            if (p.get("status") or {}).get("phase") == "Running"
            and not p["metadata"].get("deletionTimestamp")
        ]

    first = wait_for("the replica running", lambda: len(r := running()) == 2 and r, timeout=90)
    apply(control_plane, gpu_job("urgent", namespace, "lq", priority=high))
    wl = wait_for(
        "the replica noticed",
        lambda: (
            (ws := items(control_plane, WL, namespace, "-l", f"{names.LABEL_POD_GROUP_NAME}"))
            and is_true(ws[0], names.COND_PREEMPTED)
            and ws[0]
        ),
    )
    assert len(running()) == 2  # it runs through its grace period
    wait_for(
        "the replica's pods replaced by gated ones",
        lambda: (
            (ps := lws_pods(control_plane, namespace, "serve"))
            and len(ps) == 2
            and all(pg.is_gated(p) for p in ps)
            and {p["metadata"]["uid"] for p in ps}.isdisjoint(p["metadata"]["uid"] for p in first)
        ),
        timeout=GRACE + 60,
    )
    back = get(control_plane, WL, wl["metadata"]["name"], namespace)
    wait_for("urgent running", lambda: running_pods(control_plane, namespace, "urgent"))
    assert not (back.get("status") or {}).get("admission")
    control_plane.kubectl("delete", "job", "urgent", "-n", namespace, "--wait=false")
    wait_for("the replica re-admitted and running", lambda: len(running()) == 2, timeout=90)
