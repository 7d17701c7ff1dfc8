"""Two-phase admission on a real control plane: the test plays an AdmissionCheck's controller
(it sets the check Active and writes its state on Workloads) against the real controller.

A ClusterQueue naming a check that is missing or not Active admits nothing and says why; once
the check is Active, a Job's Workload reserves quota (counted in the queue) and waits, its Job
suspended, until the check says Ready; Retry releases the quota and the Workload reserves it
again after its back-off; Rejected deactivates it, with the check's message in `describe`.
"""

from __future__ import annotations

import json
import os
from typing import Any

from e2e.harness import (
    WL,
    ControllerProcess,
    apply,
    cluster_queue,
    condition,
    controller,
    flavor,
    get,
    gpu_job,
    is_true,
    local_queue,
    running_pods,
    wait_for,
    wait_for_pending_reason,
    workload_of,
)
from queuectl.api import names
from queuectl.cli.main import main
from queuectl.testenv.cluster import Cluster
from queuectl.testenv.nodes import H100
from queuectl.testenv.pytest_plugin import StandardFleet

__all__ = ["controller"]


def gated_queue(cluster: Cluster, namespace: str, check: str, gpus: int = 8) -> str:
    """An 8-GPU ClusterQueue for this namespace that lists `check`, and LocalQueue `lq`."""
    cq = f"cq-{namespace}"
    apply(
        cluster,
        flavor("h100", H100),
        cluster_queue(cq, namespace, {"h100": gpus}, admissionChecks=[check]),
        local_queue("lq", namespace, cq),
    )
    return cq


def admission_check(name: str) -> dict[str, Any]:
    return {
        "apiVersion": names.API_VERSION,
        "kind": "AdmissionCheck",
        "metadata": {"name": name},
        "spec": {"controllerName": "tests.queuectl.io/played-by-the-test"},
    }


def set_active(cluster: Cluster, check: str) -> None:
    """What the check's controller does first: mark the check Active."""
    cond = {
        "type": names.COND_ACTIVE,
        "status": "True",
        "reason": "Ready",
        "message": "the test plays this check's controller",
        "lastTransitionTime": "2026-01-01T00:00:00Z",
    }
    body = json.dumps({"status": {"conditions": [cond]}})
    cluster.kubectl(
        "patch", "admissioncheck", check, "--subresource=status", "--type=merge", "-p", body
    )


def say(cluster: Cluster, namespace: str, job: str, check: str, state: str, message: str) -> None:
    """What the check's controller does per Workload: write its state (a status write that the
    Workload webhook allows to anyone for status.admissionChecks)."""
    wl = workload_of(cluster, namespace, job)
    assert wl is not None
    entry = {
        "name": check,
        "state": state,
        "message": message,
        "lastTransitionTime": "2026-01-01T00:00:00Z",
    }
    body = json.dumps({"status": {"admissionChecks": [entry]}})
    cluster.kubectl(
        "patch", WL, wl["metadata"]["name"], "-n", namespace,
        "--subresource=status", "--type=merge", "-p", body,
    )  # fmt: skip


def check_states(wl: dict[str, Any] | None) -> dict[str, str]:
    return {
        c["name"]: c["state"] for c in ((wl or {}).get("status") or {}).get("admissionChecks") or ()
    }


def reserved_waiting(cluster: Cluster, namespace: str, job: str) -> dict[str, Any] | None:
    """The job's Workload when it holds quota with every check Pending, not admitted."""
    wl = workload_of(cluster, namespace, job)
    if (
        wl is None
        or not is_true(wl, names.COND_QUOTA_RESERVED)
        or is_true(wl, names.COND_ADMITTED)
        or not check_states(wl)
        or set(check_states(wl).values()) != {"Pending"}
    ):
        return None
    return wl


def queue_condition(cluster: Cluster, cq: str) -> tuple[str, str, str] | None:
    cond = condition(get(cluster, "clusterqueue", cq), names.COND_ACTIVE)
    return None if cond is None else (cond["status"], cond["reason"], cond.get("message", ""))


def test_a_job_waits_with_quota_reserved_until_its_check_is_ready(
    control_plane: Cluster, namespace: str, gpu_nodes: StandardFleet, controller: ControllerProcess
) -> None:
    check = f"capacity-{namespace}"
    cq = gated_queue(control_plane, namespace, check)
    apply(control_plane, gpu_job("a", namespace, "lq"))
    # The check does not exist: the queue is inactive and says so; the job waits.
    wait_for(
        "queue inactive: check not found",
        lambda: (
            (queue_condition(control_plane, cq) or ("", "", ""))[1]
            == names.REASON_ADMISSION_CHECK_NOT_FOUND
        ),
    )
    _, message = wait_for_pending_reason(
        control_plane, namespace, "a", names.REASON_CLUSTER_QUEUE_INACTIVE
    )
    assert check in message
    # It exists but its controller has not marked it Active yet.
    apply(control_plane, admission_check(check))
    wait_for(
        "queue inactive: check not Active",
        lambda: (
            (queue_condition(control_plane, cq) or ("", "", ""))[1]
            == names.REASON_ADMISSION_CHECK_INACTIVE
        ),
    )
    set_active(control_plane, check)
    # Active: a reserves the queue's quota (counted) and waits for the check, suspended.
    wl = wait_for(
        "a reserved, check Pending", lambda: reserved_waiting(control_plane, namespace, "a")
    )
    assert condition(wl, names.COND_ADMITTED)["reason"] == names.REASON_WAITING_FOR_CHECKS  # type: ignore[index]
    apply(control_plane, gpu_job("b", namespace, "lq"))
    wait_for_pending_reason(control_plane, namespace, "b", names.REASON_WAITING_FOR_QUOTA)

    def reserving() -> dict[str, Any] | None:
        st = get(control_plane, "clusterqueue", cq).get("status") or {}
        used = [
            r["total"]
            for f in st.get("flavorsReservation") or ()
            for r in f.get("resources") or ()
            if r["name"] == names.GPU_RESOURCE
        ]
        return st if st.get("reservingWorkloads") == 1 and used == [8] else None

    wait_for("the queue counts a's reservation", reserving)
    assert get(control_plane, "job", "a", namespace)["spec"]["suspend"] is True
    assert running_pods(control_plane, namespace, "a") == []
    # The check's controller says Ready: admitted, and the Job runs where its flavor is.
    say(control_plane, namespace, "a", check, "Ready", "capacity is there")
    wait_for(
        "a admitted",
        lambda: is_true(workload_of(control_plane, namespace, "a"), names.COND_ADMITTED),
    )
    pods = wait_for("a running", lambda: running_pods(control_plane, namespace, "a"), timeout=90)
    node = get(control_plane, "node", pods[0]["spec"]["nodeName"])
    assert node["metadata"]["labels"][names.LABEL_GPU_PRODUCT] == H100
    assert get(control_plane, "job", "b", namespace)["spec"]["suspend"] is True


def test_retry_releases_and_reserves_again_and_rejected_deactivates(
    control_plane: Cluster,
    namespace: str,
    controller: ControllerProcess,
    capsys: Any,
) -> None:
    check = f"gate-{namespace}"
    apply(control_plane, admission_check(check))
    set_active(control_plane, check)
    gated_queue(control_plane, namespace, check)
    apply(control_plane, gpu_job("a", namespace, "lq"))
    first = wait_for("a reserved", lambda: reserved_waiting(control_plane, namespace, "a"))
    reserved_at = condition(first, names.COND_QUOTA_RESERVED)["lastTransitionTime"]  # type: ignore[index]

    say(control_plane, namespace, "a", check, "Retry", "no capacity right now")

    def released() -> dict[str, Any] | None:
        wl = workload_of(control_plane, namespace, "a")
        requeued = condition(wl or {}, names.COND_REQUEUED) or {}
        if requeued.get("reason") != names.REASON_EVICTED_CHECK_RETRY:
            return None
        return wl

    wl = wait_for("a's reservation released after Retry", released)
    assert (wl["status"].get("requeueState") or {}).get("count") == 1
    wl = wait_for(
        "a reserved again after its back-off",
        lambda: (
            (w := reserved_waiting(control_plane, namespace, "a"))
            and condition(w, names.COND_QUOTA_RESERVED)["lastTransitionTime"] != reserved_at  # type: ignore[index]
            and w
        ),
        timeout=90,
    )
    assert get(control_plane, "job", "a", namespace)["spec"]["suspend"] is True

    say(control_plane, namespace, "a", check, "Rejected", "region has no H100 offering")
    wl = wait_for(
        "a deactivated",
        lambda: (
            (w := workload_of(control_plane, namespace, "a"))
            and w["spec"].get("active") is False
            and not is_true(w, names.COND_QUOTA_RESERVED)
            and w
        ),
    )
    requeued = condition(wl, names.COND_REQUEUED) or {}
    assert requeued.get("reason") == names.REASON_EVICTED_CHECK_REJECTED
    assert "region has no H100 offering" in requeued.get("message", "")
    assert get(control_plane, "job", "a", namespace)["spec"]["suspend"] is True

    os.environ.setdefault("NO_COLOR", "1")
    capsys.readouterr()
    rc = main(["describe", "job", "a", "-n", namespace, "--kubeconfig", control_plane.kubeconfig])
    text = capsys.readouterr().out
    assert rc == 0, text
    assert "Admission checks" in text and check in text
    assert "Rejected" in text and "region has no H100 offering" in text


def test_the_built_in_always_ready_check_admits_by_itself(
    control_plane: Cluster, namespace: str, gpu_nodes: StandardFleet, controller: ControllerProcess
) -> None:
    check = f"always-{namespace}"
    ac = admission_check(check)
    ac["spec"]["controllerName"] = names.CHECK_ALWAYS_READY
    apply(control_plane, ac)
    wait_for(
        "the controller marks its built-in check Active",
        lambda: is_true(get(control_plane, "admissioncheck", check), names.COND_ACTIVE),
    )
    gated_queue(control_plane, namespace, check)
    apply(control_plane, gpu_job("a", namespace, "lq"))
    wl = wait_for(
        "a admitted",
        lambda: (
            (w := workload_of(control_plane, namespace, "a"))
            and is_true(w, names.COND_ADMITTED)
            and w
        ),
    )
    assert check_states(wl) == {check: "Ready"}
    wait_for("a running", lambda: running_pods(control_plane, namespace, "a"), timeout=90)
