"""Issue 4 e2e, scenarios 1, 2, 5, 6, 7: quota, gangs, flavor fallback, topology, no bypass.

Each scenario runs in its own namespace with its own ClusterQueue (selecting only that
namespace) on the shared fake GPU fleet: 2 blocks x 2 racks x 2 nodes of 8 H100, 2 nodes of 8 A100.
"""

from __future__ import annotations

import subprocess
from functools import partial
from typing import Any

import pytest

from e2e.harness import (
    ControllerProcess,
    admitted,
    apply,
    cluster_queue,
    condition,
    flavor,
    get,
    gpu_job,
    local_queue,
    pods_of,
    running_pods,
    topology,
    wait_for,
    workload_of,
)
from queuectl.api import names
from queuectl.testenv.cluster import Cluster
from queuectl.testenv.nodes import A100, H100
from queuectl.testenv.pytest_plugin import StandardFleet


def queue(cluster: Cluster, namespace: str, gpus: dict[str, int], **spec: object) -> str:
    cq = f"cq-{namespace}"
    apply(
        cluster,
        flavor("h100", H100),
        flavor("a100", A100),
        cluster_queue(cq, namespace, dict(gpus), **spec),
        local_queue("lq", namespace, cq),
    )
    return cq


def quota_condition(cluster: Cluster, namespace: str, job: str) -> dict[str, Any] | None:
    """The QuotaReserved condition once it says WaitingForQuota."""
    wl = workload_of(cluster, namespace, job)
    c = condition(wl or {}, names.COND_QUOTA_RESERVED)
    return c if c and c["reason"] == names.REASON_WAITING_FOR_QUOTA else None


def why_no_reason(cluster: Cluster, namespace: str, job: str, controller: ControllerProcess) -> str:
    """What a missing pending reason leaves to look at: the Workload's conditions now, and the
    controller's pending-write figures (a reason deferred for budget is retried by its sweep)."""
    wl = workload_of(cluster, namespace, job) or {}
    status = wl.get("status") or {}
    counters = [
        line
        for line in controller.metrics().splitlines()
        if line.startswith(("queuectl_pending_writes_deferred", "queuectl_pending_workloads"))
    ]
    return (
        f"conditions: {status.get('conditions')}\nadmission: {status.get('admission')}\n"
        + "\n".join(counters)
        + f"\ncontroller log:\n{controller.log_tail(20)}"
    )


def no_pods_unless_admitted(cluster: Cluster, namespace: str, jobs: list[str]) -> None:
    """Pods are read first: a job admitted between the two reads is not a false alarm."""
    for job in jobs:
        pods = pods_of(cluster, namespace, job)
        wl = workload_of(cluster, namespace, job)
        ever_admitted = wl is not None and (
            (wl.get("status") or {}).get("admission")
            or (condition(wl, names.COND_FINISHED) or {}).get("status") == "True"
        )
        assert not pods or ever_admitted, f"{job} has pods but is not admitted"


def test_1_jobs_beyond_quota_wait_with_the_shortfall_and_start_as_quota_frees(
    control_plane: Cluster, namespace: str, gpu_nodes: StandardFleet, controller: ControllerProcess
) -> None:
    queue(control_plane, namespace, {"h100": 16})
    jobs = [f"job-{i}" for i in range(5)]
    apply(control_plane, *(gpu_job(j, namespace, "lq", runs_for="3s") for j in jobs))
    wait_for("two admitted", lambda: sum(admitted(control_plane, namespace, j) for j in jobs) == 2)
    for job in jobs:
        wl = workload_of(control_plane, namespace, job)
        assert wl is not None
        if not admitted(control_plane, namespace, job):
            try:
                cond = wait_for(
                    f"{job} reason", partial(quota_condition, control_plane, namespace, job)
                )
            except AssertionError as err:
                raise AssertionError(
                    f"{err}\n{why_no_reason(control_plane, namespace, job, controller)}"
                ) from None
            assert "nvidia.com/gpu" in cond["message"] and "short by 8" in cond["message"]

    # every job runs in turn, and no unadmitted job ever has a pod
    def all_finished() -> bool:
        no_pods_unless_admitted(control_plane, namespace, jobs)
        return all(
            (w := workload_of(control_plane, namespace, j)) is not None
            and (condition(w, names.COND_FINISHED) or {}).get("status") == "True"
            for j in jobs
        )

    wait_for("all five finished", all_finished, timeout=120, interval=0.2)


def test_2_a_gang_is_admitted_whole_or_not_at_all(
    control_plane: Cluster, namespace: str, gpu_nodes: StandardFleet, controller: ControllerProcess
) -> None:
    queue(control_plane, namespace, {"h100": 40})
    apply(control_plane, gpu_job("small", namespace, "lq", pods=2, runs_for="6s"))
    wait_for("small admitted", lambda: admitted(control_plane, namespace, "small"))
    apply(control_plane, gpu_job("gang", namespace, "lq", pods=4))
    wl = wait_for(
        "gang waiting",
        lambda: (
            (w := workload_of(control_plane, namespace, "gang"))
            and (condition(w, names.COND_QUOTA_RESERVED) or {}).get("reason")
            == names.REASON_WAITING_FOR_QUOTA
            and w
        ),
    )
    assert "needs 32" in condition(wl, names.COND_QUOTA_RESERVED)["message"]  # type: ignore[index]
    assert pods_of(control_plane, namespace, "gang") == []  # not 3 of 4, not 1 of 4: none
    wait_for("gang admitted", lambda: admitted(control_plane, namespace, "gang"), timeout=90)
    pods = wait_for(
        "4 gang pods running",
        lambda: len(p := running_pods(control_plane, namespace, "gang")) == 4 and p,
    )
    assert len({p["spec"]["nodeName"] for p in pods}) == 4


def test_5_inference_falls_back_from_h100_to_a100(
    control_plane: Cluster, namespace: str, gpu_nodes: StandardFleet, controller: ControllerProcess
) -> None:
    queue(control_plane, namespace, {"h100": 8, "a100": 16})
    apply(control_plane, gpu_job("infer-1", namespace, "lq"))
    wait_for("infer-1 admitted", lambda: admitted(control_plane, namespace, "infer-1"))
    apply(control_plane, gpu_job("infer-2", namespace, "lq"))
    wait_for("infer-2 admitted", lambda: admitted(control_plane, namespace, "infer-2"))
    flavors = {
        j: workload_of(control_plane, namespace, j)["status"]["admission"]["podSetAssignments"][0][  # type: ignore[index]
            "flavors"
        ][names.GPU_RESOURCE]
        for j in ("infer-1", "infer-2")
    }
    assert flavors == {"infer-1": "h100", "infer-2": "a100"}
    for job, product in (("infer-1", H100), ("infer-2", A100)):
        (pod,) = wait_for(f"{job} running", partial(running_pods, control_plane, namespace, job))
        node = get(control_plane, "node", pod["spec"]["nodeName"])
        assert node["metadata"]["labels"][names.LABEL_GPU_PRODUCT] == product


def test_6_a_job_that_requires_one_rack_runs_within_one_rack(
    control_plane: Cluster, namespace: str, gpu_nodes: StandardFleet, controller: ControllerProcess
) -> None:
    topo = f"topo-{namespace}"
    apply(
        control_plane,
        topology(topo, names.LABEL_TOPOLOGY_BLOCK, names.LABEL_TOPOLOGY_RACK, names.LABEL_HOSTNAME),
        flavor(f"h100-{namespace}", H100, topology=topo),
    )
    cq = f"cq-{namespace}"
    apply(
        control_plane,
        cluster_queue(cq, namespace, {f"h100-{namespace}": 64}),
        local_queue("lq", namespace, cq),
    )
    job = gpu_job(
        "rack-job",
        namespace,
        "lq",
        pods=4,
        gpus=4,
        annotations={names.ANNOTATION_PODSET_REQUIRED_TOPOLOGY: names.LABEL_TOPOLOGY_RACK},
    )
    apply(control_plane, job)
    wait_for("rack-job admitted", lambda: admitted(control_plane, namespace, "rack-job"))
    pods = wait_for(
        "4 pods running",
        lambda: len(p := running_pods(control_plane, namespace, "rack-job")) == 4 and p,
    )
    racks = {
        get(control_plane, "node", p["spec"]["nodeName"])["metadata"]["labels"][
            names.LABEL_TOPOLOGY_RACK
        ]
        for p in pods
    }
    assert len(racks) == 1


def test_7_bypass_attempts_are_refused(
    control_plane: Cluster, namespace: str, gpu_nodes: StandardFleet, controller: ControllerProcess
) -> None:
    queue(control_plane, namespace, {"h100": 8})
    apply(control_plane, gpu_job("running", namespace, "lq"), gpu_job("waiting", namespace, "lq"))
    wait_for("running admitted", lambda: admitted(control_plane, namespace, "running"))
    wait_for("waiting has its workload", lambda: workload_of(control_plane, namespace, "waiting"))

    def refused(*args: str) -> str:
        with pytest.raises(subprocess.CalledProcessError) as err:
            control_plane.kubectl(*args)
        return str(err.value.stderr)

    why = refused(
        "patch",
        "job",
        "waiting",
        "-n",
        namespace,
        "--type=merge",
        "-p",
        '{"spec":{"suspend":false}}',
    )
    assert "not admitted" in why
    why = refused(
        "label", "job", "running", "-n", namespace, "--overwrite", f"{names.LABEL_QUEUE_NAME}=other"
    )
    assert names.LABEL_QUEUE_NAME in why
    other = f"{namespace}-x"
    control_plane.kubectl("create", "namespace", other)
    try:
        why = refused("apply", "-f", "-", "--dry-run=server") if False else ""
        with pytest.raises(subprocess.CalledProcessError) as err:
            apply(control_plane, local_queue("sneaky", other, f"cq-{namespace}"))
        assert "namespace" in str(err.value.stderr).lower()
    finally:
        control_plane.kubectl("delete", "namespace", other, "--wait=false")
    assert get(control_plane, "job", "waiting", namespace)["spec"]["suspend"] is True
    assert pods_of(control_plane, namespace, "waiting") == []
