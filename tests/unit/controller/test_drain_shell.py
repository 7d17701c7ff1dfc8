"""The Drainer over the in-memory API server of the reconcile tests: a bad GPU cordons the node,
evicts the workload on it with NodeFailures, requeues it ahead of its peers; the budget defers a
second node of the same flavor until the first recovers; recovery undoes only our cordon."""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Awaitable, Callable
from typing import Any

from controller_fakes import World, admitted_world, gpu_node, merge

from queuectl import metrics
from queuectl.api import names
from queuectl.api.views import WorkloadView
from queuectl.controller.nodes.drain import Drainer, DrainOptions
from queuectl.controller.watch import kube as k

Action = Callable[[], Awaitable[None]]


class Harness:
    """A World with nodes, pods listable by node, and a Drainer whose evictions are queued."""

    def __init__(self, w: World, nodes: int = 4, share: float = 0.25) -> None:
        self.w = w
        self.queued: list[tuple[str, Action]] = []
        for i in range(nodes):
            w.add(k.NODES, gpu_node(f"n{i}"))
        self.drainer = Drainer(
            w.kube,  # type: ignore[arg-type]
            w.cache,
            w.rec.writes,
            w.rec.writes.events,
            lambda key, action: self.queued.append((key, action)),
            DrainOptions(max_share=share),
            lambda: w.now,
        )

    def node(self, name: str) -> dict[str, Any]:
        found = self.w.cache.get(k.NODES, name)
        assert found is not None
        return found

    def set_node(self, name: str, **changes: Any) -> None:
        self.w.add(k.NODES, merge(copy.deepcopy(self.node(name)), changes))

    def break_gpu(self, name: str, reason: str = "CriticalXid") -> None:
        taint = {"key": names.TAINT_GPU_UNHEALTHY, "value": reason, "effect": "NoSchedule"}
        labels = {names.LABEL_GPU_HEALTHY_COUNT: "7"}
        self.set_node(name, metadata={"labels": labels}, spec={"taints": [taint]})

    def heal_gpu(self, name: str) -> None:
        self.set_node(
            name, metadata={"labels": {names.LABEL_GPU_HEALTHY_COUNT: "8"}}, spec={"taints": []}
        )

    def bind_pod(self, job: dict[str, Any], node: str) -> None:
        meta = job["metadata"]
        ref = {"kind": "Job", "name": meta["name"], "uid": meta["uid"], "controller": True}
        self.w.add(
            k.PODS,
            {
                "metadata": {
                    "name": f"{meta['name']}-{node}",
                    "namespace": meta["namespace"],
                    "ownerReferences": [ref],
                },
                "spec": {"nodeName": node},
                "status": {"phase": "Running"},
            },
        )

    def remove_pods(self) -> None:
        for pod in self.w.cache.store(k.PODS).values():
            self.w.cache.store(k.PODS).apply("DELETED", pod)

    async def run_queued(self) -> list[str]:
        """Serve the queued evictions as the controller's worker does: the action under the
        Workload's key, then one reconcile of that key."""
        keys = []
        while self.queued:
            key, action = self.queued.pop(0)
            keys.append(key)
            await action()
            await self.w.rec.reconcile(key)
        return keys

    def node_events(self) -> list[tuple[str, str]]:
        return sorted(
            (o["reason"], o["regarding"]["name"])
            for (plural, _, _), o in self.w.kube.objects.items()
            if plural == "events" and o["regarding"]["kind"] == "Node"
        )


def sample(metric: Any, *labels: str) -> float:
    child = metric.labels(*labels) if labels else metric
    return float(child._value.get())


async def settle() -> None:
    for _ in range(3):
        await asyncio.sleep(0)


async def test_a_bad_gpu_cordons_the_node_and_requeues_the_gang_ahead_of_its_peers() -> None:
    w, key = await admitted_world()
    h = Harness(w)
    job = w.job()
    w.add(k.JOBS, merge(job, {"status": {"active": 1, "startTime": "t"}}))
    h.bind_pod(w.job(), "n1")
    drained_before = sample(metrics.CONTROLLER_NODES_DRAINED, "CriticalXid")
    evicted_before = sample(metrics.CONTROLLER_EVICTED, names.REASON_EVICTED_NODE_FAILURES)

    await h.drainer.pass_once()
    assert h.queued == []  # healthy nodes: nothing to do
    assert sample(metrics.CONTROLLER_UNHEALTHY_GPUS) == 0

    h.break_gpu("n1")
    assert w.sched.nodes()["n1"].unschedulable  # the core stops offering it at once
    await h.drainer.pass_once()
    node = h.node("n1")
    assert node["spec"]["unschedulable"] is True
    assert '"CriticalXid"' in node["metadata"]["annotations"][names.ANNOTATION_NODE_DRAINED]
    assert sample(metrics.CONTROLLER_UNHEALTHY_GPUS) == 1
    assert sample(metrics.CONTROLLER_NODES_DRAINED, "CriticalXid") == drained_before + 1

    assert await h.run_queued() == [key]
    wl = w.workload()
    cond = WorkloadView(wl).condition(names.COND_EVICTED) or {}
    assert (cond.get("status"), cond.get("reason")) == ("True", names.REASON_EVICTED_NODE_FAILURES)
    assert "n1" in cond["message"]
    assert w.job()["spec"]["suspend"] is True  # the whole gang stops
    evicted = sample(metrics.CONTROLLER_EVICTED, names.REASON_EVICTED_NODE_FAILURES)
    assert evicted == evicted_before + 1

    # A second pass while the pods terminate evicts nothing twice.
    await h.drainer.pass_once()
    assert h.queued == []

    # The pods go; quota is released and the workload waits at the front of its queue.
    w.add(k.JOBS, merge(w.job(), {"status": {"active": 0, "startTime": None}}))
    h.remove_pods()
    await w.rec.reconcile(key)
    wl = w.workload()
    assert not WorkloadView(wl).holds_quota
    requeued = WorkloadView(wl).condition(names.COND_REQUEUED) or {}
    assert (requeued.get("status"), requeued.get("reason")) == (
        "True",
        names.REASON_EVICTED_NODE_FAILURES,
    )
    assert w.sched.requeued == [key]
    assert w.sched.workloads()[key].front is True

    await settle()
    assert ("NodeDrained", "n1") in h.node_events()


async def test_the_budget_defers_a_second_node_until_the_first_recovers() -> None:
    w, _ = await admitted_world()
    h = Harness(w, nodes=4, share=0.25)  # one H100 node of four at once
    h.break_gpu("n1")
    h.break_gpu("n2")
    await h.drainer.pass_once()
    assert h.node("n1")["spec"]["unschedulable"] is True
    assert not h.node("n2")["spec"].get("unschedulable")  # tainted, not drained
    assert names.ANNOTATION_NODE_DRAINED not in (h.node("n2")["metadata"].get("annotations") or {})
    assert "1 of its 4 nodes already drained" in h.drainer.deferred["n2"]

    await h.drainer.pass_once()  # the deferral is reported once, not every pass
    await settle()
    assert h.node_events().count(("NodeDrainDeferred", "n2")) == 1

    h.heal_gpu("n1")
    await h.drainer.pass_once()
    n1 = h.node("n1")
    assert not n1["spec"].get("unschedulable")
    assert names.ANNOTATION_NODE_DRAINED not in (n1["metadata"].get("annotations") or {})
    assert h.node("n2")["spec"]["unschedulable"] is True  # its turn came in the same pass
    await settle()
    assert ("NodeRestored", "n1") in h.node_events()


async def test_recovery_leaves_a_cordon_someone_else_set() -> None:
    w, _ = await admitted_world()
    h = Harness(w)
    h.set_node("n0", spec={"unschedulable": True})  # an admin's maintenance cordon
    h.break_gpu("n0")
    await h.drainer.pass_once()
    assert names.ANNOTATION_NODE_DRAINED in h.node("n0")["metadata"]["annotations"]
    h.heal_gpu("n0")
    await h.drainer.pass_once()
    n0 = h.node("n0")
    assert n0["spec"]["unschedulable"] is True
    assert names.ANNOTATION_NODE_DRAINED not in (n0["metadata"].get("annotations") or {})


async def test_auto_drain_off_leaves_nodes_and_workloads_alone() -> None:
    w, _ = await admitted_world()
    h = Harness(w)
    h.drainer.options = DrainOptions(enabled=False)
    h.bind_pod(w.job(), "n3")
    h.break_gpu("n3")
    await h.drainer.pass_once()
    assert not h.node("n3")["spec"].get("unschedulable")
    assert h.queued == []
    assert w.sched.nodes()["n3"].unschedulable  # still offers nothing new
