"""The API server's side of the memory bench: objects as it stores them, sent as watch lines.

Each object gets what a real API server adds (uid, resourceVersion, generation,
creationTimestamp, managedFields) and reaches the controller as the JSON line of a watch event,
through the controller's own `Watcher.receive`, so parsing and slimming are the real ones.
Status writes are JSON merge patches applied to the controller's cached status (the server
keeps no copy: it would count in the measured process), on the spec rebuilt from the name.
"""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime
from typing import Any

from bench.cluster import objects
from bench.cluster.objects import Layout
from queuectl.api.resource import Resource
from queuectl.controller.watch import kube as k
from queuectl.controller.watch.cache import Cache
from queuectl.controller.watch.watcher import Watcher

Obj = dict[str, Any]
MANAGERS = ("bench-runner", "queuectl-controller")


def stamp(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def merge(target: Obj, patch: Obj) -> Obj:
    """RFC 7386 JSON merge patch, in place."""
    for key, value in patch.items():
        if value is None:
            target.pop(key, None)
        elif isinstance(value, dict) and isinstance(target.get(key), dict):
            merge(target[key], value)
        else:
            target[key] = json.loads(json.dumps(value))
    return target


def managed_fields(t: float) -> list[Obj]:
    """What server-side field tracking adds to every object (the watcher drops it)."""
    return [
        {
            "manager": m,
            "operation": "Update",
            "apiVersion": "queuectl.io/v1beta1",
            "time": stamp(t),
            "fieldsType": "FieldsV1",
            "fieldsV1": {"f:metadata": {"f:labels": {".": {}, "f:bench.queuectl.io/run": {}}}},
        }
        for m in MANAGERS
    ]


class ApiServer:
    """Numbers versions and delivers ADDED/MODIFIED lines to the cache's watchers."""

    def __init__(self, cache: Cache, lay: Layout) -> None:
        self.cache = cache
        self.lay = lay
        self.rv = 1000
        self.lines = 0
        self.watchers: dict[str, Watcher] = {}
        for w in cache.watchers:
            self.watchers.setdefault(w.store.resource.plural, w)

    def _send(self, res: Resource, kind: str, obj: Obj) -> None:
        line = json.dumps({"type": kind, "object": obj}).encode()
        self.watchers[res.plural].receive(line)
        self.lines += 1

    def create(self, res: Resource, obj: Obj, now: float) -> None:
        self.rv += 1
        meta = obj["metadata"]
        meta.update(
            uid=str(uuid.uuid5(uuid.NAMESPACE_DNS, f"{res.plural}/{meta['name']}")),
            resourceVersion=str(self.rv),
            generation=1,
            creationTimestamp=stamp(now),
            managedFields=managed_fields(now),
        )
        if res == k.NAMESPACES:  # set by the API server on every namespace
            meta.setdefault("labels", {})["kubernetes.io/metadata.name"] = meta["name"]
        self._send(res, "ADDED", obj)

    def workload_spec(self, name: str) -> Obj:
        """A bench Workload rebuilt from its name (co{c}-cq{q}-{class}-{seq})."""
        co, cq, cls, seq = name.split("-")
        stream = self.lay.scenario.stream(cls)
        return objects.workload(self.lay, int(co[2:]), int(cq[2:]), stream, int(seq))

    def patch_status(self, name: str, patch: Obj, now: float) -> Obj | None:
        """Apply a status merge patch to the Workload as cached; returns the new object."""
        cached = self.cache.get(k.WORKLOADS, name, self.lay.namespace)
        if cached is None:
            return None
        obj = self.workload_spec(name)
        meta = cached["metadata"]
        self.rv += 1
        obj["metadata"].update(
            uid=meta["uid"],
            resourceVersion=str(self.rv),
            generation=meta.get("generation", 1),
            creationTimestamp=meta["creationTimestamp"],
            managedFields=managed_fields(now),
        )
        status = json.loads(json.dumps(cached.get("status") or {}))
        obj["status"] = merge(status, patch.get("status") or {})
        self._send(k.WORKLOADS, "MODIFIED", obj)
        return obj
