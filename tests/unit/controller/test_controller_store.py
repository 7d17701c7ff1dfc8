"""The watch store: relists are diffed, stale echoes never overwrite our own newer writes."""

from __future__ import annotations

from typing import Any

from queuectl.controller.watch.kube import WORKLOADS
from queuectl.controller.watch.watcher import Store


def obj(name: str, rv: int, **spec: Any) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "ns", "resourceVersion": str(rv)}, "spec": spec}


def recording_store() -> tuple[Store, list[tuple[str, str]]]:
    store = Store(WORKLOADS)
    seen: list[tuple[str, str]] = []
    store.listeners.append(lambda kind, o, old: seen.append((kind, o["metadata"]["name"])))
    return store, seen


def test_events_reach_listeners_once() -> None:
    store, seen = recording_store()
    store.apply("ADDED", obj("a", 1))
    store.apply("ADDED", obj("a", 1))  # a duplicate (e.g. after a reconnect) is dropped
    store.apply("MODIFIED", obj("a", 2))
    store.apply("DELETED", obj("a", 3))
    assert seen == [("ADDED", "a"), ("MODIFIED", "a"), ("DELETED", "a")]
    assert store.get("ns", "a") is None


def test_an_older_echo_does_not_replace_our_newer_write() -> None:
    store, seen = recording_store()
    store.apply("ADDED", obj("a", 5, v="watch"))
    store.upsert_local(obj("a", 9, v="ours"))
    store.apply("MODIFIED", obj("a", 7, v="stale echo"))
    assert store.get("ns", "a")["spec"] == {"v": "ours"}  # type: ignore[index]
    assert seen == [("ADDED", "a"), ("MODIFIED", "a")]


def test_a_relist_reports_what_changed_while_we_were_away() -> None:
    store, seen = recording_store()
    for name in ("keep", "change", "vanish"):
        store.apply("ADDED", obj(name, 1))
    seen.clear()
    store.replace([obj("keep", 1), obj("change", 4), obj("new", 5)])
    assert sorted(seen) == [("ADDED", "new"), ("DELETED", "vanish"), ("MODIFIED", "change")]


def test_a_failing_listener_does_not_stop_the_others() -> None:
    store, seen = recording_store()

    def broken(*_: object) -> None:
        raise ZeroDivisionError

    store.listeners.insert(0, broken)
    store.apply("ADDED", obj("a", 1))
    assert seen == [("ADDED", "a")]


def test_managed_fields_are_not_kept() -> None:
    store, _ = recording_store()
    o = obj("a", 1)
    o["metadata"]["managedFields"] = [{"manager": "x"}]
    store.upsert_local(o)
    assert "managedFields" not in store.get("ns", "a")["metadata"]  # type: ignore[index]
