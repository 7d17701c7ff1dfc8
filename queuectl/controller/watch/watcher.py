"""List-then-watch one resource into an in-memory store, the way client-go's reflector does.

The initial list is paginated (`limit`/`continue`) so tens of thousands of Jobs never arrive in one
response; the watch starts from the list's resourceVersion with bookmarks, so a reconnect resumes
where it stopped instead of relisting; a 410 Gone (history compacted) relists, and the relist is
diffed against the store so listeners see every add, change and delete exactly once.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Callable
from typing import Any, Final

import aiohttp

from queuectl.api.resource import Resource
from queuectl.controller.watch.kube import Kube, KubeError, Obj, api_trouble
from queuectl.controller.watch.slim import slim

log = logging.getLogger(__name__)

Key = tuple[str, str]  # (namespace or "", name)
# (event type ADDED|MODIFIED|DELETED, new object (the last known one for DELETED), old or None)
Listener = Callable[[str, Obj, Obj | None], None]

PAGE_SIZE: Final = 500
WATCH_TIMEOUT_S: Final = 290


def key_of(obj: Obj) -> Key:
    meta = obj.get("metadata", {})
    return (meta.get("namespace") or "", meta["name"])


class Store:
    """The current objects of one kind; written only by its watcher."""

    def __init__(self, resource: Resource) -> None:
        self.resource = resource
        self.objects: dict[Key, Obj] = {}
        self.listeners: list[Listener] = []

    def get(self, namespace: str, name: str) -> Obj | None:
        return self.objects.get((namespace, name))

    def values(self) -> list[Obj]:
        return list(self.objects.values())

    def _emit(self, kind: str, obj: Obj, old: Obj | None) -> None:
        for listener in self.listeners:
            try:
                listener(kind, obj, old)
            except Exception:  # a listener bug must not stop the watch
                log.exception("listener failed on %s %s", kind, key_of(obj))

    def apply(self, kind: str, obj: Obj) -> None:
        key = key_of(obj)
        if kind == "DELETED":
            old = self.objects.pop(key, None)
            self._emit("DELETED", obj, old)
            return
        old = self.objects.get(key)
        if old is not None and (_rv(old) == _rv(obj) or _rv_int(old) > _rv_int(obj)):
            return  # a duplicate, or an echo older than our own write already recorded
        self.objects[key] = obj
        self._emit("ADDED" if old is None else "MODIFIED", obj, old)

    def replace(self, objects: list[Obj]) -> None:
        """A full relist: everything missing from it was deleted meanwhile."""
        fresh = {key_of(o): o for o in objects}
        for key in [k for k in self.objects if k not in fresh]:
            old = self.objects.pop(key)
            self._emit("DELETED", old, old)
        for obj in objects:
            self.apply("ADDED", obj)

    def upsert_local(self, obj: Obj) -> None:
        """Record our own write at once (the watch echo follows) so the next cycle sees it."""
        self.apply("MODIFIED", slim(obj))


def _rv(obj: Obj) -> str:
    return str(obj.get("metadata", {}).get("resourceVersion", ""))


def _rv_int(obj: Obj) -> int:
    try:
        return int(_rv(obj))
    except ValueError:
        return 0


class Watcher:
    """Keeps a `Store` current; `synced` is set once the first full list has landed."""

    def __init__(
        self,
        kube: Kube,
        store: Store,
        *,
        page_size: int = PAGE_SIZE,
        label_selector: str | None = None,
        field_selector: str | None = None,
    ) -> None:
        self.kube = kube
        self.store = store
        self.page_size = page_size
        self.label_selector = label_selector
        self.field_selector = field_selector
        self.synced = asyncio.Event()
        self.relists = 0
        self.resource_version = ""
        """Where the watch resumes: the last event or bookmark delivered ("" = relist)."""

    def _selectors(self) -> dict[str, str]:
        out = {}
        if self.label_selector:
            out["labelSelector"] = self.label_selector
        if self.field_selector:
            out["fieldSelector"] = self.field_selector
        return out

    async def list_all(self) -> tuple[list[Obj], str]:
        items: list[Obj] = []
        cont = ""
        resource_version = ""
        while True:
            query: dict[str, Any] = {"limit": self.page_size}
            if cont:
                query["continue"] = cont
            query.update(self._selectors())
            try:
                page = await self.kube.request(
                    "GET", self.store.resource.path(), query=query, timeout=120
                )
            except KubeError as err:
                if err.gone and cont:  # the continue token expired: start over
                    items, cont = [], ""
                    continue
                raise
            items.extend(slim(o) for o in page.get("items", []))
            meta = page.get("metadata", {})
            resource_version = meta.get("resourceVersion", resource_version)
            cont = meta.get("continue", "")
            if not cont:
                return items, resource_version

    async def run(self) -> None:
        """Forever: list, then watch; relist on 410; back off on other failures. A watch cut
        mid-stream resumes from the last event it delivered, not from where it started."""
        self.resource_version = ""
        backoff = 0.2
        while True:
            try:
                if not self.resource_version:
                    items, resource_version = await self.list_all()
                    kind = self.store.resource.kind
                    for item in items:
                        item.setdefault("kind", kind)
                        item.setdefault("apiVersion", self.store.resource.api_version)
                    self.store.replace(items)
                    self.resource_version = resource_version
                    self.relists += 1
                    self.synced.set()
                await self._watch()
                backoff = 0.2
            except asyncio.CancelledError:
                raise
            except _Gone:
                self.resource_version = ""
            except Exception as err:  # dropped connections, API server restarts: back off
                plural = self.store.resource.plural
                if api_trouble(err):
                    log.warning("watch %s: %s: %s", plural, type(err).__name__, err)
                else:
                    log.exception("watch %s failed", plural)
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, 5.0)

    async def _watch(self) -> None:
        query: dict[str, Any] = {
            "watch": "true",
            "resourceVersion": self.resource_version,
            "allowWatchBookmarks": "true",
            "timeoutSeconds": WATCH_TIMEOUT_S,
        }
        query.update(self._selectors())
        timeout = aiohttp.ClientTimeout(total=None, sock_read=WATCH_TIMEOUT_S + 30)
        response = await self.kube.raw(
            "GET", self.store.resource.path(), query=query, timeout=timeout
        )
        async with response:
            if response.status == 410:
                raise _Gone
            if response.status != 200:
                body = await response.text()
                raise KubeError(response.status, "", body[:300])
            async for line in response.content:
                self.receive(line)

    def receive(self, line: bytes) -> None:
        """One line of the watch stream: an event applied to the store, or a bookmark."""
        if not line.strip():
            return
        event = json.loads(line)
        kind = event.get("type")
        obj = event.get("object", {})
        if kind == "ERROR":
            if obj.get("code") == 410:
                raise _Gone
            raise KubeError(int(obj.get("code", 500)), str(obj.get("reason")), str(obj))
        rv = obj.get("metadata", {}).get("resourceVersion")
        if kind != "BOOKMARK":
            self.store.apply(kind, slim(obj))
        self.resource_version = rv or self.resource_version


class _Gone(Exception):
    """The watch's resourceVersion is older than the server's history: relist."""


async def run_all(watchers: list[Watcher]) -> None:
    """Run watchers until cancelled; one failing hard does not stop the others."""
    tasks = [
        asyncio.create_task(w.run(), name=f"watch-{w.store.resource.plural}") for w in watchers
    ]
    try:
        await asyncio.gather(*tasks)
    finally:
        for t in tasks:
            t.cancel()
        for t in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await t
