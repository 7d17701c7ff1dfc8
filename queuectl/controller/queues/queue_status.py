"""ClusterQueue and LocalQueue status writes, and the quota and pending gauges that go with them.

`queues.py` decides the statuses (pure); this writes those that changed, reading the core only
between cycles (`CoreThread.idle`). The controller's status loop calls `write_all` and paces it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

from queuectl import convert, metrics
from queuectl.api import names
from queuectl.api.resource import Resource
from queuectl.api.views import ObjectView, WorkloadView
from queuectl.controller.feed.corethread import CoreThread
from queuectl.controller.feed.feed import Feed
from queuectl.controller.queues import queues
from queuectl.controller.watch import kube as k
from queuectl.controller.watch.cache import Cache
from queuectl.controller.watch.kube import Kube, KubeError, Obj
from queuectl.convert import gpu_time_bank_balance


class QueueStatusWriter:
    def __init__(
        self, kube: Kube, cache: Cache, core: CoreThread, feed: Feed, clock: Callable[[], float]
    ) -> None:
        self.kube = kube
        self.cache = cache
        self.core = core
        self.feed = feed
        self.clock = clock
        self.banks_restored = False
        self._written: dict[tuple[str, str, str], float] = {}
        """(plural, namespace, name) -> when this controller last wrote that queue's status;
        a queue no longer in the cache is forgotten at the end of the round that misses it."""
        self._seen: set[tuple[str, str, str]] = set()

    async def write_all(self) -> None:
        """Every queue's status that changed, then the gauges."""
        self._seen = set()
        await self.restore_banks()  # never overwrite a balance before it was read back
        now = self.clock()
        cq_active: dict[str, bool] = {}
        cq_quota: dict[str, dict[str, Any]] = {}
        waiting = queues.waiting_for_checks(self.cache.store(k.WORKLOADS).values())
        for cq in list(self.cache.store(k.CLUSTER_QUEUES).values()):
            name = cq["metadata"]["name"]
            sched = await self.core.idle()
            qs = sched.cluster_queue_status(name)
            bank = sched.gpu_time_bank(name, now)
            st = queues.cluster_queue_status(cq, qs, now, waiting.get(name, 0), bank)
            if bank is not None:
                metrics.CONTROLLER_GPU_TIME_BANK.labels(name).set(bank)
            else:
                with contextlib.suppress(KeyError):
                    metrics.CONTROLLER_GPU_TIME_BANK.remove(name)
            cq_active[name] = any(
                c["type"] == names.COND_ACTIVE and c["status"] == "True" for c in st["conditions"]
            )
            cq_quota[name] = queues.cluster_queue_quota(qs, queues.flavor_order(cq))
            self._quota_metrics(cq, qs)
            await self._write_if_due(k.CLUSTER_QUEUES, cq, st, now)
        lq_statuses = queues.local_queue_statuses(
            self.cache.store(k.LOCAL_QUEUES).values(),
            self.cache.store(k.WORKLOADS).values(),
            self.feed,
            cq_active,
            now,
            cq_quota,
        )
        for (ns, name), st in lq_statuses.items():
            lq = self.cache.get(k.LOCAL_QUEUES, name, ns)
            if lq is not None:
                await self._write_if_due(k.LOCAL_QUEUES, lq, st, now)
        if len(self._written) > len(self._seen):
            # Deleted queues: an admin who churns many queues must not grow this forever.
            self._written = {key: t for key, t in self._written.items() if key in self._seen}
        self._pending_metrics()

    async def restore_banks(self) -> None:
        """Once, before this leader's first cycle or status write: every ClusterQueue's GPU
        time balance starts from its status (written by the previous leader), so a restart or a
        failover keeps the credit."""
        if self.banks_restored:
            return
        self.banks_restored = True
        sched = await self.core.idle()
        for cq in list(self.cache.store(k.CLUSTER_QUEUES).values()):
            balance = gpu_time_bank_balance(cq)
            if balance is not None:
                sched.restore_gpu_time_bank(cq["metadata"]["name"], balance)

    async def _write_if_due(self, res: Resource, obj: Obj, st: dict[str, Any], now: float) -> None:
        meta = obj["metadata"]
        key = (res.plural, meta.get("namespace") or "", meta["name"])
        self._seen.add(key)
        if queues.due(obj, st, self._written.get(key), now):
            await self._patch_status(res, obj, st)
            self._written[key] = now

    async def _patch_status(self, res: Resource, obj: Obj, st: dict[str, Any]) -> None:
        meta = obj["metadata"]
        try:
            new = await self.kube.patch(
                res, meta["name"], {"status": st}, meta.get("namespace"), sub="status"
            )
        except KubeError as err:
            if err.not_found:
                return
            raise
        self.cache.store(res).upsert_local(new)

    def _quota_metrics(self, cq: Obj, qs: Any) -> None:
        name = cq["metadata"]["name"]
        for group in ObjectView(cq).spec.get("resourceGroups") or ():
            for fq in group.get("flavors") or ():
                for r in fq.get("resources") or ():
                    fr = (fq["name"], r["name"])
                    labels = (name, fq["name"], r["name"])
                    nominal = convert.canonical(r["name"], r.get("nominalQuota", 0))
                    metrics.CONTROLLER_QUOTA.labels(*labels, "nominal").set(nominal)
                    used = qs.usage.get(fr, 0) if qs else 0
                    metrics.CONTROLLER_QUOTA.labels(*labels, "used").set(used)
                    borrowed = qs.borrowed.get(fr, 0) if qs else 0
                    metrics.CONTROLLER_QUOTA.labels(*labels, "borrowed").set(borrowed)

    def _pending_metrics(self) -> None:
        pending: dict[tuple[str, str], int] = {}
        admitted: dict[str, int] = {}
        for wl in self.cache.store(k.WORKLOADS).values():
            if WorkloadView(wl).is_true(names.COND_FINISHED):
                continue
            if WorkloadView(wl).holds_quota:
                cq = wl["status"]["admission"].get("clusterQueue", "")
                admitted[cq] = admitted.get(cq, 0) + 1
                continue
            view = WorkloadView(wl)
            lq = self.cache.local_queue(view.namespace, view.queue_name) or ""
            pc = view.spec.get("priorityClassName") or ""
            pending[(lq, pc)] = pending.get((lq, pc), 0) + 1
        metrics.CONTROLLER_PENDING.clear()
        for (cq, pc), n in pending.items():
            metrics.CONTROLLER_PENDING.labels(cq, pc).set(n)
        metrics.CONTROLLER_ADMITTED_ACTIVE.clear()
        for cq, n in admitted.items():
            metrics.CONTROLLER_ADMITTED_ACTIVE.labels(cq).set(n)
