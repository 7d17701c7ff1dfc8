"""One active scheduler: a coordination.k8s.io Lease, 15 s lease / 10 s renew deadline / 2 s retry.

Followers keep their caches warm (and serve webhooks) but write nothing. A leader that cannot
renew within the renew deadline stops leading and the process exits, as client-go's elector
does: a fresh start with a rebuilt cache is simpler to reason about than stepping down live.
Status writes are conditional on resourceVersion anyway, so even an overlapping old leader
cannot admit anything twice.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime

from queuectl.api import names
from queuectl.controller.kube import LEASES, Kube, KubeError, Obj

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class LeaseTiming:
    lease_duration_s: float = 15.0
    renew_deadline_s: float = 10.0
    retry_period_s: float = 2.0


class LeadershipLost(Exception):
    """This replica could not renew its Lease in time."""


def _now_micro() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _parse(value: str | None) -> float:
    if not value:
        return 0.0
    return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()


class LeaderElector:
    def __init__(
        self,
        kube: Kube,
        *,
        name: str = "queuectl-controller",
        namespace: str = names.SYSTEM_NAMESPACE,
        identity: str | None = None,
        timing: LeaseTiming = LeaseTiming(),
    ) -> None:
        self.kube = kube
        self.name = name
        self.namespace = namespace
        self.identity = identity or f"{os.uname().nodename}_{uuid.uuid4().hex[:8]}"
        self.timing = timing
        self.leading = asyncio.Event()

    def _spec(self, acquire_time: str, transitions: int) -> dict[str, object]:
        return {
            "holderIdentity": self.identity,
            "leaseDurationSeconds": int(self.timing.lease_duration_s),
            "acquireTime": acquire_time,
            "renewTime": _now_micro(),
            "leaseTransitions": transitions,
        }

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
                "spec": self._spec(_now_micro(), 0),
            }
            try:
                await self.kube.create(LEASES, body, self.namespace)
            except KubeError as cerr:
                if cerr.conflict:
                    return False
                raise
            return True
        spec = lease.get("spec") or {}
        holder = spec.get("holderIdentity")
        duration = float(spec.get("leaseDurationSeconds") or self.timing.lease_duration_s)
        expired = _parse(spec.get("renewTime")) + duration < time.time()
        if holder and holder != self.identity and not expired:
            return False
        transitions = int(spec.get("leaseTransitions") or 0)
        acquire = spec.get("acquireTime") or _now_micro()
        if holder != self.identity:
            transitions += 1
            acquire = _now_micro()
        body = {**lease, "spec": self._spec(acquire, transitions)}
        try:  # PUT with the resourceVersion we read: two candidates cannot both win
            await self.kube.request("PUT", LEASES.path(self.namespace, self.name), body=body)
        except KubeError as err:
            if err.conflict:
                return False
            raise
        return True

    async def run(self) -> None:
        """Acquire, then renew forever; raises LeadershipLost when a renewal deadline passes."""
        last_renew = 0.0
        while True:
            try:
                ok = await asyncio.wait_for(self._try(), self.timing.renew_deadline_s)
            except (TimeoutError, KubeError, OSError) as err:
                log.warning("lease %s: %s", self.name, err)
                ok = False
            now = time.monotonic()
            if ok:
                if not self.leading.is_set():
                    log.info("became leader as %s", self.identity)
                    self.leading.set()
                last_renew = now
            elif self.leading.is_set() and now - last_renew > self.timing.renew_deadline_s:
                self.leading.clear()
                raise LeadershipLost(f"{self.identity} could not renew lease {self.name}")
            await asyncio.sleep(self.timing.retry_period_s)

    async def release(self) -> None:
        """On a clean shutdown: hand the lease over at once instead of letting it expire."""
        if not self.leading.is_set():
            return
        try:
            lease = await self.kube.get(LEASES, self.name, self.namespace)
            if (lease.get("spec") or {}).get("holderIdentity") == self.identity:
                lease["spec"]["renewTime"] = _now_micro()
                lease["spec"]["leaseDurationSeconds"] = 1
                lease["spec"]["holderIdentity"] = None
                await self.kube.request("PUT", LEASES.path(self.namespace, self.name), body=lease)
        except (KubeError, OSError):
            pass
        self.leading.clear()
