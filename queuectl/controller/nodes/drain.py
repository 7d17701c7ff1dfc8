"""Auto-drain: a node with an unhealthy GPU, or one not Ready for too long, is cordoned and the
workloads on it are evicted.

The node agent marks a bad GPU on its Node (taint `gpu.queuectl.io/unhealthy`, condition
`GPUHealthy=False`); the core already stops offering such a node (convert.node). This module
does the rest: it cordons the node, evicts every admitted workload with pods on it (or a
topology assignment naming it) with reason NodeFailures, so the whole gang is suspended,
requeued ahead of its peers and admitted again elsewhere; and when the GPUs recover it undoes
its cordon. A budget keeps one bad event (a firmware push, a flaky switch) from draining more
than `max_share` of any flavor's nodes at once: the rest stay tainted (nothing new lands on
them) but keep their running work until a drained node recovers.

A node that is not Ready (or unreachable) for longer than `node_failure_s` is drained the same
way (`failure.py`); the pods left terminating there past their deadline are force-deleted, since
no kubelet will confirm them, so their job's controller counts them gone and the quota is
released. A node whose agent went silent gets the `gpu.queuectl.io/unknown` taint (nothing new
lands there) and nothing more.

The pure decisions are module functions; `Drainer` is the async shell around them.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from queuectl import convert, metrics
from queuectl.api import names
from queuectl.api.views import ObjectView, WorkloadView
from queuectl.controller.nodes import failure
from queuectl.controller.nodes.budget import budget_limit as budget_limit
from queuectl.controller.nodes.budget import flavor_members, over_budget
from queuectl.controller.nodes.hotswap import assigned_nodes as assigned_nodes
from queuectl.controller.nodes.swapping import Outcome, Swapper
from queuectl.controller.watch import kube as k
from queuectl.controller.watch import podowners
from queuectl.controller.watch.cache import Cache
from queuectl.controller.watch.kube import Kube, KubeError, Obj
from queuectl.controller.workloads.events import EventRecorder
from queuectl.controller.workloads.workload_writes import WorkloadWrites, split_key
from queuectl.core import fleet
from queuectl.core.types import GPU

log = logging.getLogger(__name__)

_HARD = ("NoSchedule", "NoExecute")
NODE_FAILURE_S = 300.0
AGENT_SILENCE_S = 600.0


@dataclass(frozen=True)
class DrainOptions:
    enabled: bool = True
    max_share: float = 0.25
    """Most of a flavor's nodes drained at once (at least one node is always allowed)."""
    resync_s: float = 5.0
    """How often drained nodes are checked again for pods that are still there."""
    node_failure_s: float = NODE_FAILURE_S
    """A node not Ready for longer than this is drained (0: never). As long as Kubernetes
    itself leaves pods on such a node (its default NoExecute toleration), so a kubelet restart
    or a network blip moves nothing."""
    agent_silence_s: float = AGENT_SILENCE_S
    """A node agent silent this long (its GPUHealthy heartbeat, refreshed every 300 s) makes the
    node's GPUs unknown (0: never): two missed heartbeats."""


# --- pure decisions -------------------------------------------------------------------------
def unhealthy_reason(node: Obj) -> str | None:
    """The agent's reason when the node has a bad GPU (taint value, or condition reason)."""
    for t in ObjectView(node).spec.get("taints") or ():
        if t.get("key") == names.TAINT_GPU_UNHEALTHY and t.get("effect") in _HARD:
            return str(t.get("value") or "GPUUnhealthy")
    for c in ObjectView(node).status.get("conditions") or ():
        if c.get("type") == names.NODE_CONDITION_GPU_HEALTHY and c.get("status") == "False":
            return str(c.get("reason") or "GPUUnhealthy")
    return None


def describe(reason: str) -> str:
    """What is wrong with a node drained for `reason`, after its name."""
    if reason in failure.NODE_FAILURE_REASONS:
        return f"is not Ready ({reason})"
    return f"has an unhealthy GPU ({reason})"


def drain_record(node: Obj) -> dict[str, Any] | None:
    """Our annotation on a node we drained, or None."""
    raw = ObjectView(node).annotations.get(names.ANNOTATION_NODE_DRAINED)
    if raw is None:
        return None
    try:
        rec = json.loads(raw)
    except ValueError:
        rec = None
    return rec if isinstance(rec, dict) else {"reason": str(raw), "cordoned": False}


def should_evict(wl: Obj | None) -> bool:
    """Admitted, not finished, not already being evicted."""
    return (
        wl is not None
        and WorkloadView(wl).holds_quota
        and not WorkloadView(wl).is_true(names.COND_EVICTED)
        and not wl["metadata"].get("deletionTimestamp")
    )


# --- the shell ------------------------------------------------------------------------------
EnqueueEviction = Callable[[str, Callable[[], Awaitable[None]]], None]
"""enqueue(workload key, action): run `action` under that Workload's work-queue key."""


class Drainer:
    def __init__(
        self,
        kube: Kube,
        cache: Cache,
        writes: WorkloadWrites,
        events: EventRecorder,
        enqueue: EnqueueEviction,
        options: DrainOptions = DrainOptions(),
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.kube = kube
        self.cache = cache
        self.writes = writes
        self.events = events
        self.enqueue = enqueue
        self.options = options
        self.clock = clock
        self.owners = cache.pod_owners()
        self.swapper = Swapper(kube, cache, writes, events)
        self.wake = asyncio.Event()
        self.deferred: dict[str, str] = {}
        """Node name -> why its drain waits (reported once per reason)."""
        self.not_ready_seen: dict[str, float] = {}
        """Node name -> when a pass first saw it not Ready (for a node whose API gives no time)."""
        cache.store(k.NODES).listeners.append(self._on_node)

    def _on_node(self, kind: str, obj: Obj, old: Obj | None) -> None:
        def view(n: Obj | None) -> tuple[Any, ...]:
            if n is None:
                return (None, None, None)
            state = failure.not_ready(n)
            return (
                unhealthy_reason(n),
                drain_record(n),
                ObjectView(n).spec.get("unschedulable"),
                state.reason if state is not None else None,
            )

        if kind == "DELETED" or view(obj) != view(old):
            self.wake.set()

    async def run(self, wait_leading: Callable[[], Awaitable[None]]) -> None:
        while True:
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self.wake.wait(), self.options.resync_s)
            self.wake.clear()
            await wait_leading()
            try:
                await self.pass_once()
            except Exception as err:
                if not k.api_trouble(err):
                    raise
                log.warning("drain pass: %s: %s", type(err).__name__, err)

    async def pass_once(self) -> None:
        """One look at every node: mark the GPUs of silent agents unknown, drain the newly bad
        (within budget), evict what is still on drained ones, restore the recovered."""
        now = self.clock()
        nodes = sorted(self.cache.store(k.NODES).values(), key=lambda n: n["metadata"]["name"])
        nodes = [await self._mark_unknown(n, now) for n in nodes]
        core_nodes = _core_nodes(nodes)
        metrics.CONTROLLER_UNHEALTHY_GPUS.set(fleet.unhealthy_gpus(core_nodes))
        metrics.CONTROLLER_UNKNOWN_GPUS.set(
            sum(
                n.allocatable.get(GPU, 0)
                for n in core_nodes
                if any(t.key == names.TAINT_GPU_UNKNOWN for t in n.taints)
            )
        )
        drained = {n["metadata"]["name"] for n in nodes if drain_record(n) is not None}
        members = flavor_members(self.cache.store(k.RESOURCE_FLAVORS).values(), nodes)
        for node in nodes:
            name = node["metadata"]["name"]
            dead = self._failed(node, now)
            if dead is not None and self.options.enabled:
                await self._release_stuck(name, now)  # drained or deferred: they are dead
            reason = unhealthy_reason(node) or dead
            record = drain_record(node)
            if reason is None:
                self.deferred.pop(name, None)
                if record is not None and await self._restore(node, record):
                    drained.discard(name)
                continue
            if not self.options.enabled:
                continue
            if record is None:
                why = over_budget(name, members, drained, self.options.max_share)
                if why is not None:
                    self._defer(node, why)
                    continue
                if not await self._cordon(node, reason):
                    continue
                drained.add(name)
            await self._evict_on(name, reason)
        metrics.CONTROLLER_DRAINED_NODES.set(len(drained))

    def _failed(self, node: Obj, now: float) -> str | None:
        """The node-failure reason once the node has been not Ready past `node_failure_s`."""
        name = node["metadata"]["name"]
        state = failure.not_ready(node)
        if state is None:
            self.not_ready_seen.pop(name, None)
            return None
        first = self.not_ready_seen.setdefault(name, now)
        limit = self.options.node_failure_s
        return state.reason if limit > 0 and failure.failed(state, now, first, limit) else None

    async def _release_stuck(self, node_name: str, now: float) -> None:
        """Force-delete pods past their deletion deadline on a failed node: their kubelet will
        never confirm them, and until they are gone their job holds its quota."""
        for pod in failure.stuck_pods(self.cache.store(k.PODS).values(), node_name, now):
            meta = pod["metadata"]
            try:
                await self.kube.delete(k.PODS, meta["name"], meta["namespace"], grace_period_s=0)
            except KubeError as err:
                if not err.not_found:
                    raise
                continue
            log.info(
                "pod %s/%s force-deleted: node %s failed",
                meta["namespace"],
                meta["name"],
                node_name,
            )
            metrics.CONTROLLER_PODS_FORCE_DELETED.inc()

    async def _mark_unknown(self, node: Obj, now: float) -> Obj:
        """Taint a node whose agent went silent, untaint it once the agent beats again; the
        node as it is after that."""
        limit = self.options.agent_silence_s
        silent = limit > 0 and failure.agent_silent(node, now, limit)
        if silent == (failure.unknown_taint(node) is not None):
            return node
        patch = {"spec": {"taints": failure.with_unknown_taint(node, silent)}}
        if not await self._patch_node(node, patch):
            return node
        name = node["metadata"]["name"]
        if silent:
            log.warning("node %s: its agent is silent; its GPUs are unknown", name)
            note = (
                f"The GPU agent's heartbeat is older than {limit:.0f}s: nothing new is placed "
                "here until it reports again"
            )
            self.events.emit(node, "Warning", names.EVENT_NODE_GPUS_UNKNOWN, "Mark", note)
        else:
            note = "The GPU agent reports again"
            self.events.emit(node, "Normal", names.EVENT_NODE_GPUS_KNOWN, "Mark", note)
        return self.cache.get(k.NODES, name) or node

    def _defer(self, node: Obj, why: str) -> None:
        name = node["metadata"]["name"]
        if self.deferred.get(name) == why:
            return
        self.deferred[name] = why
        log.warning("node %s needs a drain; deferred: %s", name, why)
        self.events.emit(
            node, "Warning", names.EVENT_NODE_DRAIN_DEFERRED, "Drain", f"Drain deferred: {why}"
        )

    async def _patch_node(self, node: Obj, patch: dict[str, Any]) -> bool:
        meta = node["metadata"]
        body = {
            **patch,
            "metadata": {
                **patch.get("metadata", {}),
                "resourceVersion": meta.get("resourceVersion"),
            },
        }
        try:
            new = await self.kube.patch(k.NODES, meta["name"], body)
        except KubeError as err:
            if err.conflict or err.not_found:
                self.wake.set()  # the watch brings the fresh node; look again
                return False
            raise
        self.cache.store(k.NODES).upsert_local(new)
        return True

    async def _cordon(self, node: Obj, reason: str) -> bool:
        name = node["metadata"]["name"]
        was_cordoned = bool(ObjectView(node).spec.get("unschedulable"))
        record = {
            "reason": reason,
            "since": convert.format_time(self.clock()),
            "cordoned": not was_cordoned,
        }
        patch: dict[str, Any] = {
            "metadata": {"annotations": {names.ANNOTATION_NODE_DRAINED: json.dumps(record)}}
        }
        if not was_cordoned:
            patch["spec"] = {"unschedulable": True}
        if not await self._patch_node(node, patch):
            return False
        self.deferred.pop(name, None)
        metrics.CONTROLLER_NODES_DRAINED.labels(reason).inc()
        log.info("node %s drained: it %s", name, describe(reason))
        self.events.emit(
            node,
            "Warning",
            names.EVENT_NODE_DRAINED,
            "Drain",
            f"The node {describe(reason)}: cordoned; its workloads are evicted and requeued",
        )
        return True

    async def _restore(self, node: Obj, record: Mapping[str, Any]) -> bool:
        patch: dict[str, Any] = {"metadata": {"annotations": {names.ANNOTATION_NODE_DRAINED: None}}}
        if record.get("cordoned"):
            patch["spec"] = {"unschedulable": None}
        if not await self._patch_node(node, patch):
            return False
        was = str(record.get("reason") or "")
        again = "Ready" if was in failure.NODE_FAILURE_REASONS else "GPUs healthy"
        log.info("node %s restored: %s again", node["metadata"]["name"], again)
        note = f"{again} again" + ("; uncordoned" if record.get("cordoned") else "")
        self.events.emit(node, "Normal", names.EVENT_NODE_RESTORED, "Restore", note)
        return True

    async def workloads_on(self, node_name: str) -> set[str]:
        """Admitted Workloads with a pod bound to the node or a topology assignment naming it."""
        keys = {
            WorkloadView(wl).key
            for wl in self.cache.store(k.WORKLOADS).values()
            if should_evict(wl) and node_name in assigned_nodes(wl)
        }
        for pod in self.cache.store(k.PODS).values():  # bound, unfinished pods (cache.py)
            if ObjectView(pod).spec.get("nodeName") != node_name:
                continue
            if pod["metadata"].get("uid") in self.swapper.deleted:
                continue  # deleted by a hot swap; the cache has not heard yet
            key = podowners.pod_workload(pod, self.owners)
            if key is not None:
                keys.add(key)
        return keys

    async def _evict_on(self, node_name: str, reason: str) -> None:
        for key in sorted(await self.workloads_on(node_name)):
            ns, name = split_key(key)
            if should_evict(self.cache.get(k.WORKLOADS, name, ns)):
                self.enqueue(key, self._evict_action(key, node_name, reason))

    def _evict_action(self, key: str, node_name: str, reason: str) -> Callable[[], Awaitable[None]]:
        async def act() -> None:
            ns, name = split_key(key)
            wl = self.cache.get(k.WORKLOADS, name, ns)
            if not should_evict(wl):
                return
            assert wl is not None
            force = reason in failure.NODE_FAILURE_REASONS
            outcome, why = await self.swapper.swap(wl, node_name, describe(reason), force=force)
            if outcome is not Outcome.NONE:
                return
            message = (
                f"Node {node_name} {describe(reason)}; the workload is stopped and "
                "requeued ahead of its peers"
            )
            if assigned_nodes(wl):
                message += f" (no node hot swap: {why})"
            await self.writes.evict(wl, names.REASON_EVICTED_NODE_FAILURES, message)
            after = self.cache.get(k.WORKLOADS, name, ns) or {}
            cond = WorkloadView(after).condition(names.COND_EVICTED) or {}
            moved = after.get("metadata", {}).get("resourceVersion") != wl["metadata"].get(
                "resourceVersion"
            )
            if moved and cond.get("reason") == names.REASON_EVICTED_NODE_FAILURES:
                metrics.CONTROLLER_EVICTED.labels(names.REASON_EVICTED_NODE_FAILURES).inc()

        return act


def _core_nodes(nodes: Iterable[Obj]) -> list[Any]:
    out = []
    for n in nodes:
        with contextlib.suppress(ValueError, KeyError, TypeError):
            out.append(convert.node(n))
    return out
