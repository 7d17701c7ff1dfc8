"""Issue 4 e2e, scenario 8: the controller is SIGKILLed mid-run and restarted.

Nothing is admitted twice, nothing is lost, and the quota the restarted controller reports
equals what the running pods hold.
"""

from __future__ import annotations

from e2e.harness import (
    WL,
    ControllerProcess,
    admitted,
    apply,
    cluster_queue,
    flavor,
    get,
    gpu_job,
    items,
    local_queue,
    running_pods,
    wait_for,
    workload_of,
)
from queuectl.api import names
from queuectl.testenv.cluster import Cluster
from queuectl.testenv.nodes import H100
from queuectl.testenv.pytest_plugin import StandardFleet


def running_gpus(cluster: Cluster, namespace: str) -> int:
    pods = items(cluster, "pods", namespace)
    return sum(
        int(c["resources"]["requests"].get(names.GPU_RESOURCE, 0))
        for p in pods
        if (p.get("status") or {}).get("phase") == "Running"
        and not p["metadata"].get("deletionTimestamp")
        for c in p["spec"]["containers"]
    )


def reported_gpus(cluster: Cluster, cq: str) -> int:
    st = get(cluster, "clusterqueue", cq).get("status") or {}
    return sum(
        int(r["total"])
        for f in st.get("flavorsUsage") or []
        for r in f["resources"]
        if r["name"] == names.GPU_RESOURCE
    )


def test_8_a_killed_controller_restarts_without_double_admission_or_loss(
    control_plane: Cluster, namespace: str, gpu_nodes: StandardFleet, controller: ControllerProcess
) -> None:
    cq = f"cq-{namespace}"
    apply(
        control_plane,
        flavor("h100", H100),
        cluster_queue(cq, namespace, {"h100": 32}),
        local_queue("lq", namespace, cq),
    )
    jobs = [f"job-{i}" for i in range(6)]
    apply(control_plane, *(gpu_job(j, namespace, "lq") for j in jobs))
    wait_for("four admitted", lambda: sum(admitted(control_plane, namespace, j) for j in jobs) == 4)
    first = {j for j in jobs if admitted(control_plane, namespace, j)}
    before = {
        w["metadata"]["name"]: w["metadata"]["uid"] for w in items(control_plane, WL, namespace)
    }

    controller.kill()
    # while it is down, one running job is deleted by its owner
    gone = sorted(first)[0]
    control_plane.kubectl("delete", "job", gone, "-n", namespace, "--wait=false")
    controller.start(timeout=90)  # waits out the dead leader's Lease

    left = [j for j in jobs if j != gone]
    wait_for(
        "a waiting job takes the freed quota",
        lambda: sum(admitted(control_plane, namespace, j) for j in left) == 4,
        timeout=60,
    )
    # the jobs admitted before the crash kept their admission: nothing re-admitted or lost
    for job in first - {gone}:
        assert admitted(control_plane, namespace, job)
    after = {
        w["metadata"]["name"]: w["metadata"]["uid"] for w in items(control_plane, WL, namespace)
    }
    for name, uid in after.items():
        assert before.get(name, uid) == uid  # no workload was recreated
    assert len(after) == 5 and all(workload_of(control_plane, namespace, j) for j in left)
    for job in left:
        assert len([p for p in running_pods(control_plane, namespace, job)]) <= 1
    wait_for(
        "running pods hold 32 GPUs",
        lambda: running_gpus(control_plane, namespace) == 32,
        timeout=60,
    )
    wait_for(
        "reported usage equals the running pods",
        lambda: reported_gpus(control_plane, cq) == running_gpus(control_plane, namespace),
        timeout=30,
    )
    assert sum(admitted(control_plane, namespace, j) for j in left) == 4
