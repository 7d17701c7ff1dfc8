"""Nodes that fail otherwise than by a GPU, over the in-memory API server of the drain tests.

A node goes unreachable under a running job: nothing new lands on it at once, and once it has
been gone longer than the node failure time it is drained, the job evicted (NodeFailures), its
pods stuck terminating there force-deleted, and the workload requeued ahead of its peers; the
node coming back restores it. A silent agent makes a node's GPUs unknown and moves nothing.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from controller_fakes import admitted_world, merge
from test_drain_shell import Harness, sample, settle

from queuectl import convert, metrics
from queuectl.api import names
from queuectl.api.views import WorkloadView
from queuectl.controller.nodes import failure
from queuectl.controller.nodes.drain import DrainOptions
from queuectl.controller.watch import kube as k
from queuectl.core import fleet

T0 = 1_735_689_600.0


def at(t: float) -> str:
    return convert.format_time(t)


def ready(status: str, since: float | None = None) -> dict[str, Any]:
    cond: dict[str, Any] = {"type": "Ready", "status": status}
    if since is not None:
        cond["lastTransitionTime"] = at(since)
    return cond


def node(conditions: list[dict[str, Any]], taints: list[dict[str, Any]] | None = None) -> Any:
    return {
        "metadata": {"name": "n"},
        "spec": {"taints": taints or []},
        "status": {"conditions": conditions},
    }


UNREACHABLE = {"key": names.TAINT_NODE_UNREACHABLE, "effect": "NoExecute", "timeAdded": at(T0)}
NOT_READY = {"key": names.TAINT_NODE_NOT_READY, "effect": "NoSchedule"}


@pytest.mark.parametrize(
    ("obj", "want"),
    [
        (node([ready("True", T0)]), None),
        (node([]), None),  # its kubelet never reported: being created, not failed
        (node([ready("False", T0)]), failure.NotReady(names.REASON_NODE_NOT_READY, T0)),
        (node([ready("Unknown", T0)]), failure.NotReady(names.REASON_NODE_UNREACHABLE, T0)),
        (node([], [NOT_READY]), failure.NotReady(names.REASON_NODE_NOT_READY, None)),
        (node([], [UNREACHABLE]), failure.NotReady(names.REASON_NODE_UNREACHABLE, T0)),
        # the earliest of the times the API gives
        (
            node([ready("Unknown", T0 + 40)], [UNREACHABLE]),
            failure.NotReady(names.REASON_NODE_UNREACHABLE, T0),
        ),
        (node([ready("False")]), failure.NotReady(names.REASON_NODE_NOT_READY, None)),
    ],
)
def test_how_and_since_when_a_node_is_not_ready(obj: Any, want: failure.NotReady | None) -> None:
    assert failure.not_ready(obj) == want


@pytest.mark.parametrize(
    ("since", "first_seen", "now", "want"),
    [
        (T0, T0, T0 + 300, False),  # exactly the failure time: not yet
        (T0, T0, T0 + 301, True),
        (T0, T0 + 500, T0 + 301, True),  # the API's time wins over when we first saw it
        (None, T0 + 100, T0 + 301, False),  # no API time: from when we first saw it
        (None, T0 + 100, T0 + 401, True),
    ],
)
def test_a_node_fails_after_the_failure_time(
    since: float | None, first_seen: float, now: float, want: bool
) -> None:
    state = failure.NotReady(names.REASON_NODE_NOT_READY, since)
    assert failure.failed(state, now, first_seen, 300) is want
    assert failure.failed(None, now, first_seen, 300) is False


def test_only_pods_past_their_deletion_deadline_on_that_node_are_stuck() -> None:
    def pod(name: str, node_name: str, deleted: float | None) -> dict[str, Any]:
        meta: dict[str, Any] = {"name": name, "namespace": "ns"}
        if deleted is not None:
            meta["deletionTimestamp"] = at(deleted)
        return {"metadata": meta, "spec": {"nodeName": node_name}}

    pods = [
        pod("past", "n1", T0 - 1),
        pod("in-grace", "n1", T0 + 30),
        pod("running", "n1", None),
        pod("elsewhere", "n2", T0 - 1),
    ]
    assert [p["metadata"]["name"] for p in failure.stuck_pods(pods, "n1", T0)] == ["past"]


# --- the drainer ------------------------------------------------------------------------------
class Failures(Harness):
    def go_dark(self, name: str, since: float) -> None:
        """The node lifecycle controller's view of a node whose kubelet stopped reporting."""
        taint = {**UNREACHABLE, "timeAdded": at(since)}
        self.set_node(
            name,
            spec={"taints": [taint]},
            status={"conditions": [ready("Unknown", since)]},
        )

    def come_back(self, name: str) -> None:
        self.set_node(name, spec={"taints": []}, status={"conditions": [ready("True", self.w.now)]})

    def terminate_pods(self, deadline: float) -> None:
        """The Job controller deleted the pods; no kubelet confirms on a dead node."""
        for pod in list(self.w.cache.store(k.PODS).values()):
            self.w.add(k.PODS, merge(pod, {"metadata": {"deletionTimestamp": at(deadline)}}))


def capacity(h: Harness) -> int:
    (h100,) = [f for f in fleet.gpu_allocation(h.w.sched) if f.flavor == "h100"]
    return h100.capacity


async def test_an_unreachable_node_is_drained_after_the_failure_time_and_its_job_requeued() -> None:
    w, key = await admitted_world()
    h = Failures(w)
    w.add(k.JOBS, merge(w.job(), {"status": {"active": 1, "startTime": "t"}}))
    h.bind_pod(w.job(), "n1")
    assert capacity(h) == 32
    drained_before = sample(metrics.CONTROLLER_NODES_DRAINED, names.REASON_NODE_UNREACHABLE)
    forced_before = sample(metrics.CONTROLLER_PODS_FORCE_DELETED)

    # Its kubelet stops reporting: the node offers nothing new at once ...
    h.go_dark("n1", since=w.now)
    assert w.sched.nodes()["n1"].unschedulable
    assert capacity(h) == 24
    # ... but a blip shorter than the failure time moves nothing.
    w.now += 300
    await h.drainer.pass_once()
    assert h.queued == []
    assert not h.node("n1")["spec"].get("unschedulable")

    # Past it, the node is drained and the job evicted with NodeFailures.
    w.now += 1
    await h.drainer.pass_once()
    n1 = h.node("n1")
    assert n1["spec"]["unschedulable"] is True
    record = json.loads(n1["metadata"]["annotations"][names.ANNOTATION_NODE_DRAINED])
    assert record["reason"] == names.REASON_NODE_UNREACHABLE
    assert await h.run_queued() == [key]
    evicted = WorkloadView(w.workload()).condition(names.COND_EVICTED) or {}
    assert evicted.get("reason") == names.REASON_EVICTED_NODE_FAILURES
    assert "n1 is not Ready (NodeUnreachable)" in evicted["message"]
    assert w.job()["spec"]["suspend"] is True
    assert sample(metrics.CONTROLLER_NODES_DRAINED, names.REASON_NODE_UNREACHABLE) == (
        drained_before + 1
    )

    # The suspended Job's pod never finishes terminating there; while its grace lasts it is
    # left alone, after its deadline it is force-deleted.
    deletes: list[tuple[str, Any]] = []
    real_delete = w.kube.delete

    async def delete(res: Any, name: str, namespace: str | None = None, **kw: Any) -> Any:
        deletes.append((name, kw.get("grace_period_s")))
        return await real_delete(res, name, namespace, **kw)

    w.kube.delete = delete  # type: ignore[method-assign]
    h.terminate_pods(deadline=w.now + 30)
    await h.drainer.pass_once()
    assert deletes == []
    w.now += 31
    await h.drainer.pass_once()
    assert deletes == [("train-n1", 0)]
    assert sample(metrics.CONTROLLER_PODS_FORCE_DELETED) == forced_before + 1

    # The Job controller counts it gone: quota released, requeued ahead of its peers.
    w.add(k.JOBS, merge(w.job(), {"status": {"active": 0, "terminating": 0, "startTime": None}}))
    h.remove_pods()
    await w.rec.reconcile(key)
    wl = w.workload()
    assert not WorkloadView(wl).holds_quota
    assert (WorkloadView(wl).condition(names.COND_REQUEUED) or {}).get("reason") == (
        names.REASON_EVICTED_NODE_FAILURES
    )
    assert w.sched.workloads()[key].front is True

    # The node comes back: uncordoned, its GPUs count again.
    h.come_back("n1")
    await h.drainer.pass_once()
    n1 = h.node("n1")
    assert not n1["spec"].get("unschedulable")
    assert names.ANNOTATION_NODE_DRAINED not in (n1["metadata"].get("annotations") or {})
    assert capacity(h) == 32
    await settle()
    assert ("NodeDrained", "n1") in h.node_events()
    assert ("NodeRestored", "n1") in h.node_events()


async def test_a_restarted_controller_reads_the_outage_start_from_the_node() -> None:
    w, key = await admitted_world()
    h = Failures(w)
    h.bind_pod(w.job(), "n2")
    h.go_dark("n2", since=w.now - 400)  # down before this drainer started
    await h.drainer.pass_once()
    assert h.node("n2")["spec"]["unschedulable"] is True
    assert [k for k, _ in h.queued] == [key]


async def test_pods_on_a_node_drained_for_its_gpu_are_never_force_deleted() -> None:
    w, _ = await admitted_world()
    h = Failures(w)
    h.bind_pod(w.job(), "n1")
    h.break_gpu("n1")
    h.terminate_pods(deadline=w.now - 60)  # its kubelet works: it will confirm them
    await h.drainer.pass_once()
    assert not [wr for wr in w.kube.writes if wr[0] == "delete"]


async def test_node_failures_off_leaves_a_dark_node_to_kubernetes() -> None:
    w, _ = await admitted_world()
    h = Failures(w)
    h.drainer.options = DrainOptions(node_failure_s=0)
    h.bind_pod(w.job(), "n1")
    h.go_dark("n1", since=w.now - 3600)
    await h.drainer.pass_once()
    assert h.queued == []
    assert not h.node("n1")["spec"].get("unschedulable")
    assert w.sched.nodes()["n1"].unschedulable  # still offers nothing new


async def test_the_drain_budget_holds_for_dark_nodes_too_but_not_for_their_dead_pods() -> None:
    w, _ = await admitted_world()
    h = Failures(w, nodes=4, share=0.25)
    h.go_dark("n1", since=w.now - 400)
    h.go_dark("n2", since=w.now - 400)
    # The job on n2 is being stopped anyway (say, preempted): its pod there never goes.
    h.bind_pod(w.job(), "n2")
    h.terminate_pods(deadline=w.now - 1)
    await h.drainer.pass_once()
    assert h.node("n1")["spec"]["unschedulable"] is True
    assert not h.node("n2")["spec"].get("unschedulable")
    assert "1 of its 4 nodes already drained" in h.drainer.deferred["n2"]
    assert h.queued == []  # the deferred node's work is not evicted ...
    assert ("delete", "pods", "train-n2") in w.kube.writes  # ... but its dead pods are freed


# --- a silent agent -----------------------------------------------------------------------
def gpu_healthy(beat: float) -> dict[str, Any]:
    return {
        "type": names.NODE_CONDITION_GPU_HEALTHY,
        "status": "True",
        "reason": names.REASON_GPU_ALL_HEALTHY,
        "lastHeartbeatTime": at(beat),
    }


async def test_a_silent_agent_makes_the_gpus_unknown_and_evicts_nothing() -> None:
    w, _ = await admitted_world()
    h = Failures(w)
    h.bind_pod(w.job(), "n3")
    beats = [ready("True", w.now - 3600), gpu_healthy(w.now)]
    h.set_node("n3", status={"conditions": beats})
    w.now += 600  # two heartbeats missed, not more
    await h.drainer.pass_once()
    assert failure.unknown_taint(h.node("n3")) is None

    w.now += 1
    await h.drainer.pass_once()
    assert h.node("n3")["spec"]["taints"] == [
        {"key": names.TAINT_GPU_UNKNOWN, "value": names.REASON_AGENT_SILENT, "effect": "NoSchedule"}
    ]
    assert w.sched.nodes()["n3"].unschedulable  # nothing new lands there
    assert capacity(h) == 24
    assert sample(metrics.CONTROLLER_UNKNOWN_GPUS) == 8
    assert h.queued == []  # the job on it keeps running
    assert not h.node("n3")["spec"].get("unschedulable")

    # The agent beats again: the taint goes, an admin's taint stays.
    admin = {"key": "maintenance", "effect": "PreferNoSchedule"}
    taints = [*h.node("n3")["spec"]["taints"], admin]
    h.set_node(
        "n3",
        spec={"taints": taints},
        status={"conditions": [ready("True", w.now - 3600), gpu_healthy(w.now)]},
    )
    await h.drainer.pass_once()
    assert h.node("n3")["spec"]["taints"] == [admin]
    assert not w.sched.nodes()["n3"].unschedulable
    assert sample(metrics.CONTROLLER_UNKNOWN_GPUS) == 0
    await settle()
    assert ("NodeGPUsUnknown", "n3") in h.node_events()
    assert ("NodeGPUsKnown", "n3") in h.node_events()


async def test_a_node_without_an_agent_is_never_unknown() -> None:
    w, _ = await admitted_world()
    h = Failures(w)
    w.now += 86400
    await h.drainer.pass_once()
    assert all(failure.unknown_taint(h.node(f"n{i}")) is None for i in range(4))
