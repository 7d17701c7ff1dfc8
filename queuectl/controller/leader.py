"""One active scheduler: a coordination.k8s.io Lease, 15 s lease / 10 s renew deadline / 2 s retry.

Followers keep their caches warm (and serve webhooks) but write nothing. A leader that cannot
renew within the renew deadline stops leading and the process exits, as client-go's elector
does: a fresh start with a rebuilt cache is simpler to reason about than stepping down live.
Status writes are conditional on resourceVersion anyway, so even an overlapping old leader
cannot admit anything twice.

Expiry uses observed time, as client-go does: a candidate takes the Lease only when the record
(holder, renewTime, resourceVersion) has not changed for leaseDurationSeconds on its OWN
monotonic clock since it first saw it. The holder's renewTime is written for people and never
compared with the local wall clock, so wall-clock skew between nodes cannot make two leaders.
The holder counts its renew deadline from the start of its last successful renewal, which is
never later than when a candidate can first have seen that renewal: 10 s < 15 s keeps them apart.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from queuectl.api import names
from queuectl.api.views import ObjectView
from queuectl.controller.watch.kube import LEASES, Kube, KubeError, Obj, api_trouble

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class LeaseTiming:
    lease_duration_s: float = 15.0
    renew_deadline_s: float = 10.0
    retry_period_s: float = 2.0


class LeadershipLost(Exception):
    """This replica could not renew its Lease in time."""


def _micro(when: datetime) -> str:
    return when.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _record(lease: Obj) -> tuple[Any, Any, Any]:
    """What must change for a Lease to count as renewed: holder, renewTime, resourceVersion."""
    spec = ObjectView(lease).spec
    meta = ObjectView(lease).meta
    return (spec.get("holderIdentity"), spec.get("renewTime"), meta.get("resourceVersion"))


class LeaderElector:
    def __init__(
        self,
        kube: Kube,
        *,
        name: str = "queuectl-controller",
        namespace: str = names.SYSTEM_NAMESPACE,
        identity: str | None = None,
        timing: LeaseTiming = LeaseTiming(),
        wall: Callable[[], datetime] = lambda: datetime.now(UTC),
        monotonic: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self.kube = kube
        self.name = name
        self.namespace = namespace
        self.identity = identity or f"{os.uname().nodename}_{uuid.uuid4().hex[:8]}"
        self.timing = timing
        self.wall = wall
        """Only for the times written into the Lease; never compared with anything."""
        self.monotonic = monotonic
        self.sleep = sleep
        self.leading = asyncio.Event()
        self._observed: tuple[Any, Any, Any] | None = None
        self._observed_at = 0.0
        """monotonic time at which `_observed` was first seen"""
        self._observed_duration = timing.lease_duration_s
        self._last_renew = 0.0

    def _now(self) -> str:
        return _micro(self.wall())

    def _spec(self, acquire_time: str, transitions: int) -> dict[str, object]:
        return {
            "holderIdentity": self.identity,
            "leaseDurationSeconds": int(self.timing.lease_duration_s),
            "acquireTime": acquire_time,
            "renewTime": self._now(),
            "leaseTransitions": transitions,
        }

    def _observe(self, lease: Obj) -> None:
        record = _record(lease)
        if record != self._observed:
            self._observed = record
            self._observed_at = self.monotonic()

    async def _try(self) -> bool:
        """One acquire-or-renew attempt; True while we hold the lease."""
        try:
            lease: Obj = await self.kube.get(LEASES, self.name, self.namespace)
        except KubeError as err:
            if not err.not_found:
                raise
            body = {
                "apiVersion": "coordination.k8s.io/v1",
                "kind": "Lease",
                "metadata": {"name": self.name, "namespace": self.namespace},
                "spec": self._spec(self._now(), 0),
            }
            try:
                created = await self.kube.create(LEASES, body, self.namespace)
            except KubeError as cerr:
                if cerr.conflict:
                    return False
                raise
            self._observe(created)
            return True
        self._observe(lease)
        spec = ObjectView(lease).spec
        holder = spec.get("holderIdentity")
        duration = float(spec.get("leaseDurationSeconds") or self.timing.lease_duration_s)
        self._observed_duration = duration
        expired = self.monotonic() - self._observed_at >= duration
        if holder and holder != self.identity and not expired:
            return False
        transitions = int(spec.get("leaseTransitions") or 0)
        acquire = spec.get("acquireTime") or self._now()
        if holder != self.identity:
            transitions += 1
            acquire = self._now()
        body = {**lease, "spec": self._spec(acquire, transitions)}
        try:  # PUT with the resourceVersion we read: two candidates cannot both win
            written = await self.kube.request(
                "PUT", LEASES.path(self.namespace, self.name), body=body
            )
        except KubeError as err:
            if err.conflict:
                return False
            raise
        self._observe(written)
        return True

    async def step(self) -> None:
        """One acquire-or-renew attempt and what follows from it: `leading` set on success;
        LeadershipLost when the leader's last good renewal is older than the renew deadline.
        API trouble of any kind is a failed attempt, never the end of the loop."""
        started = self.monotonic()
        try:
            ok = await asyncio.wait_for(self._try(), self.timing.renew_deadline_s)
        except Exception as err:
            if not api_trouble(err):
                raise
            log.warning("lease %s: %s: %s", self.name, type(err).__name__, err)
            ok = False
        if ok:
            if not self.leading.is_set():
                log.info("became leader as %s", self.identity)
                self.leading.set()
            self._last_renew = started
            return
        if not self.leading.is_set():
            return
        holder = self._observed[0] if self._observed else None
        if holder not in (None, self.identity):
            self.leading.clear()
            raise LeadershipLost(f"{self.identity} found lease {self.name} held by {holder}")
        if self.monotonic() - self._last_renew > self.timing.renew_deadline_s:
            self.leading.clear()
            raise LeadershipLost(f"{self.identity} could not renew lease {self.name}")

    def pause_s(self) -> float:
        """Seconds until the next attempt: the retry period, or less for a candidate whose
        watched record expires sooner, so a failover does not wait up to one more retry period
        past the lease (17 s instead of 15 s after the last renewal it saw, at worst)."""
        retry = self.timing.retry_period_s
        if self.leading.is_set() or self._observed is None or self._observed[0] is None:
            return retry
        left = self._observed_at + self._observed_duration - self.monotonic()
        return min(retry, left + 0.05) if left > 0 else retry

    async def run(self) -> None:
        """Acquire, then renew forever; raises LeadershipLost when a renewal deadline passes."""
        while True:
            await self.step()
            await self.sleep(self.pause_s())

    async def release(self) -> None:
        """On a clean shutdown: hand the lease over at once instead of letting it expire."""
        if not self.leading.is_set():
            return
        try:
            lease = await self.kube.get(LEASES, self.name, self.namespace)
            if ObjectView(lease).spec.get("holderIdentity") == self.identity:
                lease["spec"]["renewTime"] = self._now()
                lease["spec"]["leaseDurationSeconds"] = 1
                lease["spec"]["holderIdentity"] = None
                await self.kube.request("PUT", LEASES.path(self.namespace, self.name), body=lease)
        except Exception as err:
            if not api_trouble(err):
                raise
        self.leading.clear()
