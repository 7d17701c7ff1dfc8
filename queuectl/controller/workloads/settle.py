"""Workload status writes whose outcome a dropped connection hides.

A write that fails with a transport error, a timeout or a 5xx may or may not have landed. For a
write whose intent is idempotent (a preemption notice, an eviction, a requeue) the answer is to
read the Workload again and ask the same question of the fresh object: a write that landed
unseen reads as done, one that did not is made again. The loop backs off while the API server
is away; the worker holding the key waits with it (a leader that cannot reach the API server
for its renew deadline exits anyway).

Admission is different (the core has already charged the quota): see `Decisions.admit`.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from queuectl.api.errors import is_transient
from queuectl.api.views import WorkloadView
from queuectl.controller.admission import status
from queuectl.controller.watch import kube as k
from queuectl.controller.watch.kube import KubeError, Obj

if TYPE_CHECKING:  # the writes call these helpers; these helpers call the writes back
    from queuectl.controller.workloads.workload_writes import WorkloadWrites

log = logging.getLogger(__name__)

Patch = dict[str, Any]
FIRST_BACKOFF_S = 0.2
MAX_BACKOFF_S = 5.0


async def read_back(rec: WorkloadWrites, wl: Obj) -> Obj | None:
    """GET the Workload into the cache; None (and forgotten) when it is gone."""
    ns, name = wl["metadata"].get("namespace"), wl["metadata"]["name"]
    try:
        fresh = await rec.kube.get(k.WORKLOADS, name, ns)
    except KubeError as err:
        if not err.not_found:
            raise
        rec.feed.forget(WorkloadView(wl).key)
        return None
    rec.cache.store(k.WORKLOADS).apply("MODIFIED", fresh)
    return rec.cache.get(k.WORKLOADS, name, ns) or fresh


async def write_settled(
    rec: WorkloadWrites,
    wl: Obj,
    patch_for: Callable[[Obj], Patch | None],
    *,
    sleep: Callable[[float], Any] = asyncio.sleep,
) -> Obj | None:
    """`rec.write_status(wl, patch_for(wl))` that a transport error cannot leave undecided.

    `patch_for` returns None when the object already says what the write would (so a write
    that landed unseen is recognised). Returns the Workload as written or found done; None on
    a conflict (the fresh object is in the cache, as with `write_status`) or when it is gone.
    """
    delay = FIRST_BACKOFF_S
    current: Obj | None = wl
    while current is not None:
        patch = patch_for(current)
        if patch is None:
            return current
        try:
            return await rec.write_status(current, patch)
        except Exception as err:
            if not is_transient(err):
                raise
            log.warning(
                "writing %s: %s: %s; reading it back",
                WorkloadView(current).key,
                type(err).__name__,
                err,
            )
        current = await _read_back_until_answered(rec, current, delay, sleep)
        delay = min(delay * 4, MAX_BACKOFF_S)
    return None


async def write_requeued(rec: WorkloadWrites, wl: Obj, now: float) -> Obj | None:
    """Quota released once the pods are gone: back to pending at its original position,
    settled (a requeue lost in transit would leak quota). None when nothing was written."""
    return await write_settled(
        rec,
        wl,
        lambda w: (
            status.requeued(w, now, status.admitted_seconds(w, now), rec.backoff)
            if WorkloadView(w).holds_quota
            else None
        ),
    )


async def _read_back_until_answered(
    rec: WorkloadWrites, wl: Obj, delay: float, sleep: Callable[[float], Any]
) -> Obj | None:
    while True:
        await sleep(delay)
        delay = min(delay * 2, MAX_BACKOFF_S)
        try:
            return await read_back(rec, wl)
        except Exception as err:
            if not is_transient(err):
                raise
