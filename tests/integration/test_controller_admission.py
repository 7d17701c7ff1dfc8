"""The controller on a real control plane: queued Jobs get Workloads, are admitted within quota,
wait with a reason beyond it, start when quota frees, and take their Workload with them."""

from __future__ import annotations

from typing import Any

import yaml

from e2e.harness import (
    WL,
    ControllerProcess,
    admitted,
    apply,
    condition,
    controller,
    get,
    gpu_job,
    items,
    one_queue,
    pods_of,
    priority_class,
    running_pods,
    wait_for,
    wait_for_pending_reason,
    workload_of,
)
from queuectl.api import names
from queuectl.testenv.cluster import Cluster
from queuectl.testenv.nodes import H100
from queuectl.testenv.pytest_plugin import StandardFleet

__all__ = ["controller"]


def test_jobs_beyond_quota_wait_with_a_reason_and_start_as_quota_frees(
    control_plane: Cluster, namespace: str, gpu_nodes: StandardFleet, controller: ControllerProcess
) -> None:
    one_queue(control_plane, namespace, 16)
    apply(
        control_plane,
        gpu_job("a", namespace, "lq", runs_for="4s"),
        gpu_job("b", namespace, "lq"),
        gpu_job("c", namespace, "lq"),
    )
    wait_for(
        "a and b admitted",
        lambda: admitted(control_plane, namespace, "a") and admitted(control_plane, namespace, "b"),
    )
    _, message = wait_for_pending_reason(
        control_plane, namespace, "c", names.REASON_WAITING_FOR_QUOTA
    )
    assert "nvidia.com/gpu" in message and "h100" in message and "short by 8" in message
    assert get(control_plane, "job", "c", namespace)["spec"]["suspend"] is True
    assert pods_of(control_plane, namespace, "c") == []
    # a completes after 4s: its Workload is Finished and c takes its quota
    wait_for(
        "c admitted after a finished", lambda: admitted(control_plane, namespace, "c"), timeout=90
    )
    wl_a = workload_of(control_plane, namespace, "a")
    assert wl_a is not None and condition(wl_a, names.COND_FINISHED)["status"] == "True"  # type: ignore[index]
    pods = wait_for("c running", lambda: running_pods(control_plane, namespace, "c"))
    node = get(control_plane, "node", pods[0]["spec"]["nodeName"])
    assert node["metadata"]["labels"][names.LABEL_GPU_PRODUCT] == H100


def test_deleting_a_job_deletes_its_workload_and_frees_quota(
    control_plane: Cluster, namespace: str, gpu_nodes: StandardFleet, controller: ControllerProcess
) -> None:
    one_queue(control_plane, namespace, 8)
    apply(control_plane, gpu_job("first", namespace, "lq"), gpu_job("second", namespace, "lq"))
    wait_for("first admitted", lambda: admitted(control_plane, namespace, "first"))
    control_plane.kubectl("delete", "job", "first", "-n", namespace, "--wait=false")
    wait_for("second admitted", lambda: admitted(control_plane, namespace, "second"))
    wait_for(
        "first's workload gone", lambda: workload_of(control_plane, namespace, "first") is None
    )


def test_a_workload_created_directly_is_admitted(
    control_plane: Cluster, namespace: str, controller: ControllerProcess
) -> None:
    one_queue(control_plane, namespace, 8)
    wl: dict[str, Any] = {
        "apiVersion": names.API_VERSION,
        "kind": "Workload",
        "metadata": {"name": "direct", "namespace": namespace},
        "spec": {
            "queueName": "lq",
            "podSets": [
                {
                    "name": "main",
                    "count": 2,
                    "template": {
                        "spec": {
                            "containers": [
                                {
                                    "name": "c",
                                    "image": "x",
                                    "resources": {"requests": {names.GPU_RESOURCE: "4"}},
                                }
                            ]
                        }
                    },
                }
            ],
        },
    }
    apply(control_plane, wl)
    got = wait_for(
        "direct admitted",
        lambda: (
            (w := get(control_plane, WL, "direct", namespace))
            and condition(w, names.COND_ADMITTED)
            and w
        ),
    )
    (psa,) = got["status"]["admission"]["podSetAssignments"]
    assert psa["flavors"] == {names.GPU_RESOURCE: "h100"}
    assert int(psa["resourceUsage"][names.GPU_RESOURCE]) == 8


def test_queue_status_counts_pending_and_admitted(
    control_plane: Cluster, namespace: str, gpu_nodes: StandardFleet, controller: ControllerProcess
) -> None:
    cq = one_queue(control_plane, namespace, 8)
    apply(control_plane, *(gpu_job(f"j{i}", namespace, "lq") for i in range(3)))

    def counts() -> tuple[Any, ...] | None:
        st = get(control_plane, "clusterqueue", cq).get("status") or {}
        lq = get(control_plane, "localqueue", "lq", namespace).get("status") or {}
        got = (
            st.get("admittedWorkloads"),
            st.get("pendingWorkloads"),
            lq.get("admittedWorkloads"),
            lq.get("pendingWorkloads"),
        )
        return got if got == (1, 2, 1, 2) else None

    wait_for("counts 1 admitted, 2 pending", counts)
    st = get(control_plane, "clusterqueue", cq)["status"]
    assert st["flavorsUsage"] == [
        {"name": "h100", "resources": [{"name": names.GPU_RESOURCE, "total": 8, "borrowed": 0}]}
    ]
    active = condition(st and {"status": st}, names.COND_ACTIVE)
    assert active is not None and active["status"] == "True"
    assert len(items(control_plane, WL, namespace)) == 3


def test_a_waiting_job_relabelled_to_a_higher_class_is_admitted_first(
    control_plane: Cluster, namespace: str, gpu_nodes: StandardFleet, controller: ControllerProcess
) -> None:
    low, high = f"low-{namespace}", f"high-{namespace}"
    apply(control_plane, priority_class(low, 10), priority_class(high, 1000))
    one_queue(control_plane, namespace, 8)
    apply(control_plane, gpu_job("running", namespace, "lq", priority=low, runs_for="6s"))
    wait_for("running admitted", lambda: admitted(control_plane, namespace, "running"))
    apply(control_plane, gpu_job("older", namespace, "lq", priority=low))
    apply(control_plane, gpu_job("newer", namespace, "lq", priority=low))
    wait_for("newer's Workload", lambda: workload_of(control_plane, namespace, "newer"))
    control_plane.kubectl(
        "label",
        "job",
        "newer",
        "-n",
        namespace,
        f"{names.LABEL_PRIORITY_CLASS}={high}",
        "--overwrite",
    )
    wl = wait_for(
        "newer's Workload at the new priority",
        lambda: (
            (w := workload_of(control_plane, namespace, "newer")) is not None
            and w["spec"].get("priority") == 1000
            and w
        ),
    )
    assert wl["spec"]["priorityClassName"] == high
    wait_for("newer admitted next", lambda: admitted(control_plane, namespace, "newer"))
    assert not admitted(control_plane, namespace, "older")


def test_a_job_naming_a_missing_priority_class_waits_until_the_class_is_created(
    control_plane: Cluster, namespace: str, gpu_nodes: StandardFleet, controller: ControllerProcess
) -> None:
    """Not admitted at a guessed priority 0: `kubectl apply` warns, the Workload says what to do,
    and once the class exists the Job is admitted at its value."""
    late = f"late-{namespace}"
    one_queue(control_plane, namespace, 8)
    job = gpu_job("early", namespace, "lq", priority=late)
    done = control_plane.kubectl("apply", "-f", "-", input=yaml.safe_dump(job))
    assert f"WorkloadPriorityClass {late} does not exist; the Job waits" in done.stderr
    _, message = wait_for_pending_reason(
        control_plane, namespace, "early", names.REASON_PRIORITY_CLASS_NOT_FOUND
    )
    assert f"WorkloadPriorityClass {late} does not exist; create it" in message
    assert not admitted(control_plane, namespace, "early")
    assert get(control_plane, "job", "early", namespace)["spec"]["suspend"] is True

    apply(control_plane, priority_class(late, 500))
    wait_for("early admitted", lambda: admitted(control_plane, namespace, "early"))
    wait_for(
        "the class's value recorded on the Workload",
        lambda: (
            (workload_of(control_plane, namespace, "early") or {})["spec"].get("priority") == 500
        ),
    )
