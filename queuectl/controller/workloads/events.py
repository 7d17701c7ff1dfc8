"""Kubernetes Events for humans: admission, preemption, eviction. Best effort, bounded."""

from __future__ import annotations

import asyncio
import logging
import os
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Final

from queuectl import metrics
from queuectl.api import names
from queuectl.api.views import ObjectView
from queuectl.controller.watch.kube import EVENTS, Kube, Obj, api_trouble
from queuectl.controller.workloads.pacing import EVENT_BURST, EVENT_QPS, TokenBucket

log = logging.getLogger(__name__)
MAX_PENDING: Final = 256
ROUTINE: Final = frozenset(
    {names.EVENT_ADMITTED, names.EVENT_QUOTA_RESERVED, names.EVENT_FINISHED, names.EVENT_REQUEUED}
)
"""Reasons every workload goes through, one Event each: under a write backlog they yield
(`EventRecorder.busy`). Preemption, eviction and the rest are rarer and say what went wrong."""


class EventRecorder:
    """Creates events.k8s.io/v1 Events without ever blocking the caller; drops when swamped
    (an Event is a courtesy, a status write is the truth). At most `qps` a second on average
    (bursts of `burst`): a quiet cluster sees every Event, a benchmark's thousands of
    admissions a minute do not spend the API server on them. While `busy` says the controller's
    own status writes queue up (the API server is the bottleneck), the `ROUTINE` ones are not
    sent at all: each would delay a write that admits or releases quota. Drops are counted."""

    def __init__(
        self,
        kube: Kube,
        instance: str | None = None,
        *,
        qps: float = EVENT_QPS,
        burst: int = EVENT_BURST,
        busy: Callable[[], bool] = lambda: False,
    ) -> None:
        self.kube = kube
        self.instance = instance or f"{os.uname().nodename}-{os.getpid()}"
        self.busy = busy
        self._tasks: set[asyncio.Task[None]] = set()
        self._bucket = TokenBucket(qps, burst, time.monotonic())

    def emit(self, obj: Obj, type_: str, reason: str, action: str, note: str) -> None:
        if reason in ROUTINE and self.busy():
            metrics.CONTROLLER_EVENTS_DROPPED.labels("busy").inc()
            return
        if len(self._tasks) >= MAX_PENDING:
            metrics.CONTROLLER_EVENTS_DROPPED.labels("in_flight").inc()
            return
        if not self._bucket.take(time.monotonic()):
            metrics.CONTROLLER_EVENTS_DROPPED.labels("rate_limit").inc()
            return
        task = asyncio.create_task(self._create(obj, type_, reason, action, note))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _create(self, obj: Obj, type_: str, reason: str, action: str, note: str) -> None:
        meta = ObjectView(obj).meta
        namespace = meta.get("namespace") or "default"
        now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        body = {
            "apiVersion": "events.k8s.io/v1",
            "kind": "Event",
            "metadata": {
                "name": f"{meta.get('name', 'obj')[:200]}.{uuid.uuid4().hex[:12]}",
                "namespace": namespace,
            },
            "eventTime": now,
            "type": type_,
            "reason": reason,
            "action": action,
            "note": note[:1024],
            "reportingController": f"{names.GROUP}/controller",
            "reportingInstance": self.instance[:128],
            "regarding": {
                "apiVersion": obj.get("apiVersion", ""),
                "kind": obj.get("kind", ""),
                "name": meta.get("name", ""),
                "namespace": namespace,
                "uid": meta.get("uid", ""),
            },
        }
        try:
            await self.kube.create(EVENTS, body, namespace)
        except Exception as err:
            if not api_trouble(err):
                raise
            log.debug("event %s dropped: %s", reason, err)

    async def drain(self, timeout: float = 2.0) -> None:
        deadline = time.monotonic() + timeout
        while self._tasks and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
