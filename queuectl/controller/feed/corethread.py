"""The scheduling core off the event loop: cycles run on one dedicated thread.

A cycle over a large backlog takes seconds; on the event loop it would stall webhook answers,
Lease renewal, watches and writes for that long. So `run_cycle` runs on the thread
`queuectl-core`, and the loop never touches the `Scheduler` while it does:

- mutations (the Feed's upserts and deletes, the Reconciler's requeues) made while a cycle
  runs wait in an inbox and are applied by the loop, in order, when the cycle returns, before
  anyone reads the core again and before the next cycle; when no cycle runs they are applied at
  once, as before;
- reads wait for the core to be idle: `pending_info` answers None while busy and remembers the
  key, so the controller asks again after the cycle (a worker never blocks on a cycle);
  everything else reads through `idle()`, which hands over the scheduler once no cycle runs.

Only the loop thread reads or writes `busy`, the inbox and the unanswered keys; the core thread
runs nothing but `Scheduler.run_cycle`. CPython's GIL hands the loop the interpreter at least
every switch interval (`SWITCH_INTERVAL_S`) while the core thread computes.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import sys
import time
from collections import deque
from collections.abc import AsyncIterator, Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from typing import Any

from queuectl.core import Scheduler
from queuectl.core import types as core
from queuectl.core.results import CycleResult, PendingInfo

log = logging.getLogger(__name__)

CATCH_UP_SLICE_S = 0.005
"""The inbox is applied in slices of about this long, yielding to the loop in between."""

SWITCH_INTERVAL_S = 0.001
"""How long the loop may wait for the interpreter while the core thread computes (CPython's
default is 5 ms; an HTTPS answer waits for it several times). Set for the whole process when
the core thread starts: no other thread of the controller competes for the CPU."""


class CoreThread:
    """Owns the `Scheduler` for the controller: the Feed's `CoreInputs` and the Reconciler's
    `CoreActions`, safe to call from the loop whether or not a cycle runs."""

    def __init__(self, sched: Scheduler | None = None) -> None:
        self._sched = sched if sched is not None else Scheduler()
        self._busy = False
        self._idle = asyncio.Event()
        self._idle.set()
        self._inbox: deque[Callable[[], None]] = deque()
        self._unanswered: set[str] = set()
        self._executor: ThreadPoolExecutor | None = None

    @property
    def busy(self) -> bool:
        """A cycle runs, or its inbox is not yet applied: the core may not be read now."""
        return self._busy

    async def idle(self) -> Scheduler:
        """The scheduler, once no cycle runs. Read it before your next `await`."""
        while self._busy:
            await self._idle.wait()
        return self._sched

    # --- the cycle --------------------------------------------------------------------------
    @asynccontextmanager
    async def cycle(self, now: float) -> AsyncIterator[CycleResult]:
        """Run one cycle on the core thread and yield its result with the core still busy
        (what must happen before the queued mutations land goes in the block); on leaving,
        the inbox is applied and the core is idle again."""
        if self._busy:
            raise RuntimeError("a cycle is already running")
        self._busy = True
        self._idle.clear()
        if self._executor is None:
            sys.setswitchinterval(SWITCH_INTERVAL_S)
            self._executor = ThreadPoolExecutor(1, thread_name_prefix="queuectl-core")
        running = asyncio.get_running_loop().run_in_executor(
            self._executor, self._sched.run_cycle, now
        )
        try:
            # Shielded: a cancelled caller must not leave the loop mutating the core while the
            # thread still runs the cycle. The core stays busy until the thread is done.
            result = await asyncio.shield(running)
        except asyncio.CancelledError:
            running.add_done_callback(lambda _: self._release_after_cancel())
            raise
        except BaseException:
            await self._catch_up()
            raise
        try:
            yield result
        finally:
            await self._catch_up()

    def _release_after_cancel(self) -> None:
        self._apply_all()
        self._idle_again()

    async def _catch_up(self) -> None:
        """Apply the inbox in order, a slice at a time; mutations that arrive meanwhile join
        its tail, so the order of calls is the order of application."""
        while self._inbox:
            deadline = time.perf_counter() + CATCH_UP_SLICE_S
            while self._inbox and time.perf_counter() < deadline:
                self._apply(self._inbox.popleft())
            if self._inbox:
                await asyncio.sleep(0)
        self._idle_again()

    def _apply_all(self) -> None:
        while self._inbox:
            self._apply(self._inbox.popleft())

    def _idle_again(self) -> None:
        self._busy = False
        self._idle.set()

    @staticmethod
    def _apply(mutation: Callable[[], None]) -> None:
        try:
            mutation()
        except Exception:  # one bad input must not drop the mutations behind it
            log.exception("applying a queued core input failed")

    def take_unanswered(self) -> set[str]:
        """Workload keys whose pending reason was asked for while the core was busy."""
        keys, self._unanswered = self._unanswered, set()
        return keys

    def close(self) -> None:
        if self._executor is not None:
            self._executor.shutdown(wait=False, cancel_futures=True)
            self._executor = None

    # --- inputs: at once when idle, else after the cycle --------------------------------------
    def _mutate(self, method: Callable[..., None], *args: Any, **kwargs: Any) -> None:
        if self._busy:
            self._inbox.append(functools.partial(method, *args, **kwargs))
        else:
            method(*args, **kwargs)

    def upsert_flavor(self, flavor: core.Flavor) -> None:
        self._mutate(self._sched.upsert_flavor, flavor)

    def delete_flavor(self, name: str) -> None:
        self._mutate(self._sched.delete_flavor, name)

    def upsert_topology(self, topology: core.Topology) -> None:
        self._mutate(self._sched.upsert_topology, topology)

    def delete_topology(self, name: str) -> None:
        self._mutate(self._sched.delete_topology, name)

    def upsert_cohort(self, cohort: core.Cohort) -> None:
        self._mutate(self._sched.upsert_cohort, cohort)

    def delete_cohort(self, name: str) -> None:
        self._mutate(self._sched.delete_cohort, name)

    def upsert_cluster_queue(self, cq: core.ClusterQueue) -> None:
        self._mutate(self._sched.upsert_cluster_queue, cq)

    def delete_cluster_queue(self, name: str) -> None:
        self._mutate(self._sched.delete_cluster_queue, name)

    def upsert_admission_check(self, check: core.AdmissionCheck) -> None:
        self._mutate(self._sched.upsert_admission_check, check)

    def delete_admission_check(self, name: str) -> None:
        self._mutate(self._sched.delete_admission_check, name)

    def upsert_node(self, node: core.Node) -> None:
        self._mutate(self._sched.upsert_node, node)

    def delete_node(self, name: str) -> None:
        self._mutate(self._sched.delete_node, name)

    def upsert_workload(self, workload: core.Workload) -> None:
        self._mutate(self._sched.upsert_workload, workload)

    def delete_workload(self, key: str) -> None:
        self._mutate(self._sched.delete_workload, key)

    def requeue_workload(self, key: str, *, not_before: float = 0.0, front: bool = False) -> None:
        self._mutate(self._sched.requeue_workload, key, not_before=not_before, front=front)

    # --- reads --------------------------------------------------------------------------------
    def pending_info(self, key: str) -> PendingInfo | None:
        """The core's reason for a pending workload; None while a cycle runs (the key is
        remembered: `take_unanswered`)."""
        if self._busy:
            self._unanswered.add(key)
            return None
        return self._sched.pending_info(key)
