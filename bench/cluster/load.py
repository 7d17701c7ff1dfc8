"""The load generator: streams of Workloads per ClusterQueue, one watch, runtimes, finishes.

What it does in place of a job controller and kubelets: every stream creates its Workloads at
its interval (one request in flight per stream; late streams catch up without sleeping); a
single watch on the run's namespace reports admissions; each admitted Workload is marked
Finished `runtime` after the runner saw it Admitted, by one conditional status patch. A
Workload the controller preempts or evicts stops "running" when the runner sees it (the timer
is dropped); for Workloads without a Job the controller itself releases the quota, and a
readmitted Workload runs its whole runtime again, as a restarted job would.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from bench.cluster import objects
from bench.cluster.kubeapi import MERGE_PATCH, Api, ApiError
from bench.cluster.objects import Layout
from bench.cluster.record import Recorder, parse_time
from bench.cluster.scenario import Stream
from queuectl.api import names

log = logging.getLogger(__name__)
RETRYABLE = frozenset({429, 500, 502, 503, 504})


def _true(conds: list[dict[str, Any]], type_: str) -> bool:
    return any(c.get("type") == type_ and c.get("status") == "True" for c in conds)


def running(conds: list[dict[str, Any]]) -> bool:
    """Admitted and not being stopped: what a job controller would let run."""
    return (
        _true(conds, names.COND_ADMITTED)
        and not _true(conds, names.COND_EVICTED)
        and not _true(conds, names.COND_PREEMPTED)
        and not _true(conds, names.COND_FINISHED)
    )


@dataclass
class Seen:
    """The latest version of a running Workload: what the finish patch is conditional on."""

    resource_version: str
    conditions: list[dict[str, Any]]
    epoch: int


class Load:
    def __init__(
        self,
        api: Api,
        layout: Layout,
        recorder: Recorder,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.api = api
        self.lay = layout
        self.rec = recorder
        self.clock = clock
        self.path = f"/apis/{names.API_VERSION}/namespaces/{layout.namespace}/workloads"
        self.runtime: dict[str, float] = {}
        self.seen: dict[str, Seen] = {}
        self.epoch: dict[str, int] = {}
        self.timers: dict[str, asyncio.TimerHandle] = {}
        self.tasks: set[asyncio.Task[None]] = set()
        self.done = asyncio.Event()
        self.finished = 0
        self.creation_lag_max = 0.0
        self.retries = 0
        self.conflicts = 0
        self.watch_events = 0
        self.finish_latencies: list[float] = []
        """Runtime over -> Finished patch answered: how late the runner finishes work."""
        self.topology_admissions = 0
        """Admissions seen with a topology assignment on every pod set (placed on nodes)."""
        self.domains_used: dict[int, int] = {}
        """Of those: how many finest-level domains (nodes) one pod set's pods were given, how
        many admissions each: a gang packed on one node or spread over several."""
        self.evicted_after_runtime = 0
        """Evictions of work whose runtime was already over, its Finished patch not yet
        written: the runner's lag, not work a real cluster would lose (a job controller
        reports a finished pod at once)."""
        for c, q in layout.queues():
            for stream in layout.scenario.streams:
                for seq in range(stream.count):
                    name = objects.workload_name(c, q, stream, seq)
                    recorder.add(name, stream.cls, stream.units, stream.size_class)
                    self.runtime[name] = stream.runtime_s

    # --- run -------------------------------------------------------------------------------
    async def run(self, timeout: float, sample_every: float = 0.25) -> bool:
        """Create everything, wait until every Workload finished; False on timeout."""
        listed = await self.api.request("GET", self.path, params={"limit": "1"})
        watch = asyncio.create_task(self._watch(listed["metadata"]["resourceVersion"]))
        sampler = asyncio.create_task(self._sample(sample_every))
        t0 = self.clock() + 0.1
        streams = [
            asyncio.create_task(self._stream(c, q, s, t0))
            for c, q in self.lay.queues()
            for s in self.lay.scenario.streams
        ]
        try:
            await asyncio.wait_for(self.done.wait(), timeout)
            return True
        except TimeoutError:
            return False
        finally:
            for t in [*streams, watch, sampler, *self.tasks]:
                t.cancel()
            for h in self.timers.values():
                h.cancel()
            await asyncio.gather(*streams, watch, sampler, *self.tasks, return_exceptions=True)

    async def _sample(self, every: float) -> None:
        while True:
            self.rec.sample(self.clock())
            await asyncio.sleep(every)

    async def _stream(self, c: int, q: int, stream: Stream, t0: float) -> None:
        for seq in range(stream.count):
            due = t0 + seq * stream.interval_s
            delay = due - self.clock()
            if delay > 0:
                await asyncio.sleep(delay)
            else:
                self.creation_lag_max = max(self.creation_lag_max, -delay)
            body = objects.workload(self.lay, c, q, stream, seq)
            self.rec.created(body["metadata"]["name"], self.clock())
            await self._create(body)

    async def _create(self, body: dict[str, Any]) -> None:
        for attempt in range(20):
            try:
                await self.api.request("POST", self.path, body)
                return
            except ApiError as err:
                if err.status == 409:  # an earlier attempt got through
                    return
                if err.status not in RETRYABLE:
                    raise
            except (TimeoutError, OSError) as err:
                log.warning("create %s: %s", body["metadata"]["name"], err)
            self.retries += 1
            await asyncio.sleep(min(2.0, 0.05 * 2**attempt))
        raise RuntimeError(f"could not create {body['metadata']['name']}")

    # --- observation -----------------------------------------------------------------------
    async def _watch(self, resource_version: str) -> None:
        rv = resource_version
        while True:
            try:
                async for event in self.api.watch(self.path, rv):
                    obj = event.get("object") or {}
                    rv = (obj.get("metadata") or {}).get("resourceVersion", rv)
                    if event.get("type") in ("ADDED", "MODIFIED"):
                        self.watch_events += 1
                        self.observe(obj)
                    elif event.get("type") == "ERROR":
                        raise ApiError(int(obj.get("code") or 500), str(obj.get("message")))
            except ApiError as err:
                if err.status != 410:
                    log.warning("watch: %s; resuming", err)
                    await asyncio.sleep(0.2)
                    continue
                rv = await self._relist()
            except (TimeoutError, OSError) as err:
                log.warning("watch: %s; resuming", err)
                await asyncio.sleep(0.2)

    async def _relist(self) -> str:
        """After 410 Gone: read everything once more and observe it."""
        listed = await self.api.request("GET", self.path)
        for obj in listed.get("items") or ():
            self.observe(obj)
        return str(listed["metadata"]["resourceVersion"])

    def observe(self, obj: dict[str, Any]) -> None:
        meta = obj["metadata"]
        name = meta["name"]
        item = self.rec.items.get(name)
        if item is None or item.finished is not None:
            return
        conds = (obj.get("status") or {}).get("conditions") or []
        now = self.clock()
        if _true(conds, names.COND_FINISHED):  # our own patch, seen before its response
            self._mark_finished(name)
            return
        if running(conds):
            admitted = next(
                c
                for c in conds
                if c.get("type") == names.COND_ADMITTED and c.get("status") == "True"
            )
            self.rec.api_admission(
                name,
                parse_time(meta.get("creationTimestamp")),
                parse_time(admitted.get("lastTransitionTime")),
            )
            if item.running_since is None:
                self._placed((obj.get("status") or {}).get("admission") or {})
                self.rec.admitted(name, now)
                epoch = self.epoch[name] = self.epoch.get(name, 0) + 1
                loop = asyncio.get_running_loop()
                self.timers[name] = loop.call_later(self.runtime[name], self._finish_soon, name)
            else:
                epoch = self.epoch[name]
            self.seen[name] = Seen(meta["resourceVersion"], conds, epoch)
        elif item.running_since is not None:  # evicted, preempted or requeued: stopped
            timer = self.timers.pop(name, None)
            if timer is not None:
                timer.cancel()
            else:  # the timer fired: its runtime was over, the finish still on its way
                self.evicted_after_runtime += 1
            self.seen.pop(name, None)
            self.epoch[name] = self.epoch.get(name, 0) + 1
            self.rec.stopped(name, now, finished=False)

    def _placed(self, admission: dict[str, Any]) -> None:
        assignments = admission.get("podSetAssignments") or ()
        topo = [a.get("topologyAssignment") for a in assignments]
        if topo and all(topo):
            self.topology_admissions += 1
            used = len(topo[0].get("domains") or ())
            self.domains_used[used] = self.domains_used.get(used, 0) + 1

    # --- finishing -------------------------------------------------------------------------
    def _finish_soon(self, name: str) -> None:
        self.timers.pop(name, None)
        task = asyncio.create_task(self._finish(name, self.epoch.get(name, 0)))
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    async def _finish(self, name: str, epoch: int) -> None:
        due = self.clock()
        for _ in range(10):
            seen = self.seen.get(name)
            if seen is None or seen.epoch != epoch or self.epoch.get(name) != epoch:
                return  # stopped (or restarted) since the timer was set
            cond = {
                "type": names.COND_FINISHED,
                "status": "True",
                "reason": names.REASON_FINISHED_SUCCEEDED,
                "message": f"bench: ran {self.runtime[name]:g}s",
                "lastTransitionTime": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
            }
            body = {
                "metadata": {"resourceVersion": seen.resource_version},
                "status": {"conditions": [*seen.conditions, cond]},
            }
            try:
                await self.api.request(
                    "PATCH",
                    f"{self.path}/{name}/status",
                    body,
                    content_type=MERGE_PATCH,
                    urgent=True,
                )
            except ApiError as err:
                if err.status == 409:
                    self.conflicts += 1
                    await self._refresh(name)
                    continue
                if err.status == 404:
                    return
                if err.status not in RETRYABLE:
                    raise
                self.retries += 1
                await asyncio.sleep(0.2)
                continue
            except (TimeoutError, OSError) as err:
                log.warning("finish %s: %s", name, err)
                self.retries += 1
                await asyncio.sleep(0.2)
                continue
            self.finish_latencies.append(self.clock() - due)
            self._mark_finished(name)
            return
        raise RuntimeError(f"could not finish {name}")

    def _mark_finished(self, name: str) -> None:
        if self.rec.items[name].finished is not None:
            return
        self.seen.pop(name, None)
        timer = self.timers.pop(name, None)
        if timer is not None:
            timer.cancel()
        self.rec.stopped(name, self.clock(), finished=True)
        self.finished += 1
        if self.finished == len(self.rec.items):
            self.done.set()

    async def _refresh(self, name: str) -> None:
        """After a conflict: the current object decides whether it still runs."""
        try:
            obj = await self.api.request("GET", f"{self.path}/{name}", urgent=True)
        except ApiError as err:
            if err.status == 404:
                return
            raise
        self.observe(obj)
