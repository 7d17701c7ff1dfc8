"""Plain pod groups on the real control plane: bare pods queued as one gang.

The webhook creates each queued pod with the scheduling gate queuectl.io/admission; the group's
Workload appears only once all its pods exist; admission lifts every gate with the placement
(a 4 x 8 GPU gang inside one rack); a preempted group gets the notice, runs through its grace
period, then its pods are deleted and its Workload waits, requeued, for replacement pods;
lifting the gate or changing the group by hand is refused.
"""

from __future__ import annotations

import json
import time
from typing import Any

from e2e.harness import (
    WL,
    ControllerProcess,
    apply,
    cluster_queue,
    condition,
    flavor,
    get,
    gpu_job,
    is_true,
    items,
    local_queue,
    one_queue,
    priority_class,
    rack_pool,
    running_pods,
    wait_for,
)
from queuectl.api import names
from queuectl.convert import parse_time
from queuectl.jobs import podgroup as pg
from queuectl.testenv.cluster import Cluster
from queuectl.testenv.nodes import H100
from queuectl.testenv.pytest_plugin import StandardFleet

GRACE = 6


def group_pod(
    name: str,
    namespace: str,
    group: str | None,
    total: int,
    *,
    gpus: int = 8,
    priority: str | None = None,
    annotations: dict[str, str] | None = None,
) -> dict[str, Any]:
    labels = {names.LABEL_QUEUE_NAME: "lq"}
    notes = dict(annotations or {})
    if group is not None:
        labels[names.LABEL_POD_GROUP_NAME] = group
        notes[names.ANNOTATION_POD_GROUP_TOTAL_COUNT] = str(total)
    if priority:
        labels[names.LABEL_PRIORITY_CLASS] = priority
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "labels": labels, "annotations": notes},
        "spec": {
            "restartPolicy": "Never",
            "terminationGracePeriodSeconds": 0,
            "containers": [
                {
                    "name": "main",
                    "image": "registry.k8s.io/pause:3.10",
                    "resources": {
                        "requests": {names.GPU_RESOURCE: str(gpus)},
                        "limits": {names.GPU_RESOURCE: str(gpus)},
                    },
                }
            ],
        },
    }


def group_pods(cluster: Cluster, namespace: str, group: str) -> list[dict[str, Any]]:
    return items(cluster, "pods", namespace, "-l", f"{names.LABEL_POD_GROUP_NAME}={group}")


def running(cluster: Cluster, namespace: str, group: str) -> list[dict[str, Any]]:
    return [
        p
        for p in group_pods(cluster, namespace, group)
        if (p.get("status") or {}).get("phase") == "Running"
        and not p["metadata"].get("deletionTimestamp")
    ]


def group_workload(cluster: Cluster, namespace: str, group: str) -> dict[str, Any] | None:
    found = items(cluster, WL, namespace, "-l", f"{names.LABEL_POD_GROUP_NAME}={group}")
    return found[0] if found else None


def admitted(cluster: Cluster, namespace: str, group: str) -> bool:
    wl = group_workload(cluster, namespace, group)
    return wl is not None and is_true(wl, names.COND_ADMITTED)


def wait_admitted(cluster: Cluster, namespace: str, group: str, timeout: float = 60) -> None:
    """Wait for the group's admission; a timeout shows why its Workload waits."""
    try:
        wait_for(f"{group} admitted", lambda: admitted(cluster, namespace, group), timeout)
    except AssertionError as err:
        wl = group_workload(cluster, namespace, group) or {}
        raise AssertionError(f"{err}; its Workload: {wl.get('status')}") from None


def kubectl_refused(cluster: Cluster, *args: str, input: str | None = None) -> str:
    done = cluster.kubectl(*args, check=False, input=input)
    assert done.returncode != 0, f"kubectl {' '.join(args)} was not refused"
    return done.stderr


def test_a_4x8_gpu_pod_group_waits_for_its_last_pod_then_runs_whole_in_one_rack(
    control_plane: Cluster, namespace: str, gpu_nodes: StandardFleet, controller: ControllerProcess
) -> None:
    rack_pool(control_plane, namespace, f"pg{int(time.time()) % 100000}", gpus=64)
    rack = {names.ANNOTATION_PODSET_REQUIRED_TOPOLOGY: names.LABEL_TOPOLOGY_RACK}
    pods = [group_pod(f"gang-{i}", namespace, "gang", 4, annotations=rack) for i in range(4)]
    apply(control_plane, *pods[:3])
    created = group_pods(control_plane, namespace, "gang")
    assert len(created) == 3 and all(pg.is_gated(p) for p in created)
    assert group_workload(control_plane, namespace, "gang") is None  # 3 of 4: no Workload yet
    apply(control_plane, pods[3])
    wait_admitted(control_plane, namespace, "gang")
    wl = group_workload(control_plane, namespace, "gang")
    assert wl is not None and [ps["count"] for ps in wl["spec"]["podSets"]] == [4]
    up = wait_for(
        "4 gang pods running",
        lambda: len(p := running(control_plane, namespace, "gang")) == 4 and p,
    )
    racks = {
        get(control_plane, "node", p["spec"]["nodeName"])["metadata"]["labels"][
            names.LABEL_TOPOLOGY_RACK
        ]
        for p in up
    }
    assert len(racks) == 1
    for p in up:
        assert p["metadata"]["labels"][names.LABEL_WORKLOAD] == wl["metadata"]["name"]


def test_a_preempted_group_gets_its_grace_period_then_its_pods_go_and_it_waits_for_new_ones(
    control_plane: Cluster, namespace: str, gpu_nodes: StandardFleet, controller: ControllerProcess
) -> None:
    low, high, cq = f"low-{namespace}", f"high-{namespace}", f"cq-{namespace}"
    apply(
        control_plane,
        flavor("h100", H100),
        priority_class(low, 10, grace=GRACE),
        priority_class(high, 1000),
        cluster_queue(
            cq, namespace, {"h100": 8}, preemption={"withinClusterQueue": "LowerPriority"}
        ),
        local_queue("lq", namespace, cq),
    )
    victims = [group_pod(f"v-{i}", namespace, "victim", 2, gpus=4, priority=low) for i in range(2)]
    apply(control_plane, *victims)
    wait_for("victim running", lambda: len(running(control_plane, namespace, "victim")) == 2)
    apply(control_plane, gpu_job("urgent", namespace, "lq", priority=high))
    wl = wait_for(
        "victim noticed",
        lambda: (
            (w := group_workload(control_plane, namespace, "victim"))
            and is_true(w, names.COND_PREEMPTED)
            and w
        ),
    )
    stamp = wl["status"]["preemption"]["deadline"]
    deadline = parse_time(stamp)
    assert deadline is not None

    def noticed_pods() -> list[dict[str, Any]]:
        pods = running(control_plane, namespace, "victim")
        notes = [(p["metadata"].get("annotations") or {}) for p in pods]
        ok = all(n.get(names.ANNOTATION_PREEMPTION_DEADLINE) == stamp for n in notes)
        return pods if ok else []

    noticed = wait_for("the notice on every pod", noticed_pods)
    assert len(noticed) == 2  # still running during the grace period
    requeued = wait_for(
        "victim's pods deleted and its Workload requeued",
        lambda: (
            (w := group_workload(control_plane, namespace, "victim"))
            and is_true(w, names.COND_REQUEUED)
            and not group_pods(control_plane, namespace, "victim")
            and w
        ),
        timeout=GRACE + 60,
    )
    assert not (requeued.get("status") or {}).get("admission")
    evicted = condition(requeued, names.COND_EVICTED) or {}
    assert evicted.get("reason") == names.REASON_EVICTED_PREEMPTION
    assert parse_time(evicted.get("lastTransitionTime")) or deadline - 1 <= 0
    wait_for("urgent running", lambda: running_pods(control_plane, namespace, "urgent"), timeout=60)
    # Replacement pods of the same group wait (gated) while urgent holds the GPUs, then run.
    apply(control_plane, *victims)

    def waits_for_quota() -> bool:
        wl = group_workload(control_plane, namespace, "victim") or {}
        cond = condition(wl, names.COND_QUOTA_RESERVED) or {}
        return cond.get("reason") not in (None, names.REASON_POD_GROUP_INCOMPLETE)

    try:
        wait_for("the Workload waits for quota, not for pods", waits_for_quota)
    except AssertionError as err:
        wl = group_workload(control_plane, namespace, "victim") or {}
        raise AssertionError(f"{err}; its Workload: {wl.get('status')}") from None
    assert all(pg.is_gated(p) for p in group_pods(control_plane, namespace, "victim"))
    control_plane.kubectl("delete", "job", "urgent", "-n", namespace, "--wait=false")
    wait_for(
        "victim re-admitted and running again",
        lambda: len(running(control_plane, namespace, "victim")) == 2,
        timeout=60,
    )


def test_bypass_attempts_on_a_queued_pod_are_refused(
    control_plane: Cluster, namespace: str, gpu_nodes: StandardFleet, controller: ControllerProcess
) -> None:
    one_queue(control_plane, namespace, 8)
    apply(control_plane, group_pod("big-0", namespace, "big", 2, gpus=8))
    pod = get(control_plane, "pod", "big-0", namespace)
    assert pg.is_gated(pod)
    ungate = kubectl_refused(
        control_plane,
        "patch", "pod", "big-0", "-n", namespace, "--type=json",
        "-p", '[{"op": "remove", "path": "/spec/schedulingGates"}]',
    )  # fmt: skip
    assert "lifted by queuectl" in ungate
    recount = kubectl_refused(
        control_plane,
        "annotate", "pod", "big-0", "-n", namespace, "--overwrite",
        f"{names.ANNOTATION_POD_GROUP_TOTAL_COUNT}=1",
    )  # fmt: skip
    assert "cannot change" in recount
    # Scale-up while admitted: a third pod of a running pair stays gated (no quota for it).
    apply(control_plane, *(group_pod(f"pair-{i}", namespace, "pair", 2, gpus=4) for i in (0, 1)))
    wait_for("the pair running", lambda: len(running(control_plane, namespace, "pair")) == 2)
    apply(control_plane, group_pod("pair-2", namespace, "pair", 2, gpus=4))
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:  # the controller has seen it: it reconciles the group
        assert pg.is_gated(get(control_plane, "pod", "pair-2", namespace))
        time.sleep(0.5)
    assert len(running(control_plane, namespace, "pair")) == 2
    ungated = group_pod("sneaky", namespace, None, 1)
    ungated["metadata"]["labels"][names.LABEL_WORKLOAD] = "mine"
    refused = kubectl_refused(control_plane, "create", "-f", "-", input=json.dumps(ungated))
    assert "set by queuectl only" in refused


def test_a_single_pod_is_a_group_of_one(
    control_plane: Cluster, namespace: str, gpu_nodes: StandardFleet, controller: ControllerProcess
) -> None:
    one_queue(control_plane, namespace, 8)
    apply(control_plane, group_pod("solo", namespace, None, 1))
    wait_for(
        "solo running",
        lambda: (
            (get(control_plane, "pod", "solo", namespace).get("status") or {}).get("phase")
            == "Running"
        ),
    )
    (wl,) = items(control_plane, WL, namespace)
    assert wl["metadata"]["ownerReferences"][0]["name"] == "solo"
    control_plane.kubectl("delete", "pod", "solo", "-n", namespace)
    wait_for("its Workload gone with it", lambda: not items(control_plane, WL, namespace))


def test_a_groups_workload_deleted_while_it_runs_takes_the_pods_with_its_quota(
    control_plane: Cluster, namespace: str, gpu_nodes: StandardFleet, controller: ControllerProcess
) -> None:
    """Deleting a running group's Workload frees its quota (a LeaderWorkerSet remade after a
    template change does the same); the pods that admission ungated may not run on beside the
    group that takes the quota next: the enforcement loop deletes them."""
    one_queue(control_plane, namespace, 8)
    apply(control_plane, *(group_pod(f"sweep-{i}", namespace, "sweep", 2, gpus=4) for i in (0, 1)))
    wait_admitted(control_plane, namespace, "sweep")
    wait_for("sweep running", lambda: len(running(control_plane, namespace, "sweep")) == 2)
    apply(control_plane, group_pod("next-0", namespace, "next", 1, gpus=4))
    wl = group_workload(control_plane, namespace, "sweep")
    assert wl is not None
    control_plane.kubectl("delete", WL, wl["metadata"]["name"], "-n", namespace)
    wait_for("sweep's pods deleted", lambda: not running(control_plane, namespace, "sweep"))
    wait_admitted(control_plane, namespace, "next")
    wait_for("next running", lambda: len(running(control_plane, namespace, "next")) == 1)
    assert not running(control_plane, namespace, "sweep")
    assert 'reason="unadmitted"' in controller.metrics()
