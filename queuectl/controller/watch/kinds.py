"""Watches for every registered job kind (and what a kind reads its pod sets from, a TrainJob's
runtimes), each started once its resource is served.

A kind whose CRD is not installed (no JobSet operator here) is not an error: it is logged once
at start and its group-version's discovery document is read again every `recheck_s`; once the
CRD is served its watch starts, without a restart. Discovery needs no RBAC beyond what every
authenticated user has, and costs one small GET per missing kind per period
(docs/design/controller.md, "Job kinds").
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Iterable

from queuectl.api.resource import Resource
from queuectl.controller.watch.cache import Cache
from queuectl.controller.watch.kube import READ_TIMEOUT_S, Kube, KubeError, api_trouble
from queuectl.jobs import JobKind
from queuectl.jobs.registry import input_resources

log = logging.getLogger(__name__)

RECHECK_S = 30.0


async def served(kube: Kube, resource: Resource) -> bool:
    """Whether the API server serves `resource` now (its group-version lists its plural). An
    unknown group-version is a plain-text 404, not a Status, so the answer is read by hand."""
    response = await kube.raw("GET", resource.discovery_path(), timeout=READ_TIMEOUT_S)
    async with response:
        body = await response.read()
        status = response.status
    if status == 404:
        return False
    if not 200 <= status <= 299:
        raise KubeError(status, "", body[:300].decode(errors="replace"))
    doc = json.loads(body)
    return any(r.get("name") == resource.plural for r in doc.get("resources") or ())


class KindWatches:
    """Starts the cache's watch of each job kind: at once for those served, later for the rest."""

    def __init__(
        self, kube: Kube, cache: Cache, kinds: Iterable[JobKind], recheck_s: float = RECHECK_S
    ) -> None:
        self.kube = kube
        self.cache = cache
        kinds = list(kinds)
        self.inputs = input_resources(kinds)
        self.resources = [kind.resource for kind in kinds] + list(self.inputs)
        self.recheck_s = recheck_s
        self.missing: list[Resource] = []

    def _what(self, res: Resource) -> str:
        return "job kind input" if res in self.inputs else "job kind"

    async def discover(self) -> None:
        """Before the watches start: watch every kind served now, one log line for each that
        is not (or could not be checked: it is checked again later)."""
        for res in self.resources:
            try:
                found = await served(self.kube, res)
            except Exception as err:
                if not api_trouble(err):
                    raise
                found, why = False, f"discovery failed ({type(err).__name__}: {err})"
            else:
                why = "its CRD is not installed"
            if found:
                self.cache.watch(res)
                continue
            self.missing.append(res)
            log.info(
                "%s %s (%s/%s): not watched, %s; checking again every %.0f s",
                self._what(res),
                res.kind,
                res.api_version,
                res.plural,
                why,
                self.recheck_s,
            )

    async def run(self) -> None:
        """Until cancelled: start the watch of each missing kind once it is served, and run it."""
        tasks: list[asyncio.Task[None]] = []
        try:
            while True:
                await asyncio.sleep(self.recheck_s)
                for res in list(self.missing):
                    try:
                        if not await served(self.kube, res):
                            continue
                    except Exception as err:
                        if not api_trouble(err):
                            raise
                        log.warning("discovery of %s: %s: %s", res.kind, type(err).__name__, err)
                        continue
                    self.missing.remove(res)
                    watcher = self.cache.watch(res)
                    log.info(
                        "%s %s (%s): now served; watching it",
                        self._what(res),
                        res.kind,
                        res.api_version,
                    )
                    tasks.append(asyncio.create_task(watcher.run(), name=f"watch-{res.plural}"))
        finally:
            for t in tasks:
                t.cancel()
            for t in tasks:
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await t
