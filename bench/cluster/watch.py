"""What the runner watches of the controller besides the API server, during the load: its
Lease (a watch on the runner's loop), its webhook (a probe on its own thread) and its cycle-time
histogram (scraped at both ends), and the figures made of them.
"""

from __future__ import annotations

import argparse
import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from bench.cluster import lease, probe, stats
from bench.cluster.controller import ControllerProcess
from bench.cluster.kubeapi import Api
from bench.cluster.objects import Layout

CYCLE_HISTOGRAM = "queuectl_scheduling_cycle_duration_seconds"


@dataclass(frozen=True)
class Watched:
    """What the runner watches of the controller besides the API server: its Lease, its webhook
    (None: not probed) and its /metrics (None: no cycle figures)."""

    lease_namespace: str
    lease_name: str
    webhook_url: str | None
    webhook_ca: str | None
    scrape: Callable[[], str] | None


def watched_from(args: argparse.Namespace, ctl: ControllerProcess | None) -> Watched:
    """The controller the runner started, or the one --lease/--webhook-url/--webhook-ca name."""
    if ctl is not None:
        return Watched(ctl.namespace, ctl.LEASE, ctl.webhook_url, str(ctl.ca_file), ctl.metrics)
    namespace, _, name = str(args.lease).partition("/")
    if not namespace or not name:
        raise SystemExit(f"--lease wants NAMESPACE/NAME, got {args.lease!r}")
    if bool(args.webhook_url) != bool(args.webhook_ca):
        raise SystemExit("--webhook-url and --webhook-ca go together (the probe verifies TLS)")
    return Watched(namespace, name, args.webhook_url, args.webhook_ca, None)


async def scrape(watched: Watched) -> str:
    """The controller's /metrics text; "" when it has none to give (then no cycle figures)."""
    if watched.scrape is None:
        return ""
    try:
        return await asyncio.to_thread(watched.scrape)
    except OSError:
        return ""


@dataclass
class SideWatches:
    """The Lease watch (a task on the runner's loop) and the webhook probe (its own thread)."""

    lease_log: lease.LeaseLog
    lease_task: asyncio.Task[None]
    probe_log: probe.ProbeLog | None
    probe_thread: probe.ProbeThread | None

    @classmethod
    def start(cls, api: Api, lay: Layout, watched: Watched) -> SideWatches:
        lease_log = lease.LeaseLog()
        task = asyncio.create_task(
            lease.watch(api, watched.lease_namespace, watched.lease_name, lease_log)
        )
        probe_log = thread = None
        if watched.webhook_url is not None and watched.webhook_ca is not None:
            probe_log = probe.ProbeLog()
            target = probe.Target(
                watched.webhook_url, watched.webhook_ca, lay.namespace, lay.cluster_queue(0, 0)
            )
            thread = probe.ProbeThread(target, probe_log)
            thread.start()
        return cls(lease_log, task, probe_log, thread)

    async def stop(self) -> None:
        self.lease_task.cancel()
        await asyncio.gather(self.lease_task, return_exceptions=True)
        if self.probe_thread is not None:
            await asyncio.to_thread(self.probe_thread.stop)


def controller_watch(
    lease_log: lease.LeaseLog,
    load_end: float,
    probe_log: probe.ProbeLog | None,
    metrics_before: str,
    metrics_after: str,
) -> dict[str, Any]:
    """The figures of the controller's responsiveness during the load."""
    held = lease_log.summary(until=load_end)
    cycle = (
        stats.histogram_ms(metrics_before, metrics_after, CYCLE_HISTOGRAM)
        if metrics_after
        else None
    )
    return {
        "webhook_probe_ms": None if probe_log is None else probe_log.summary(),
        "lease_renewal_max_gap_s": held["max_gap_s"],
        "lease": held,
        "cycle_ms": cycle,
    }
