"""What the watcher keeps of an object: everything but managedFields, strings shared."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from queuectl.controller.watch.slim import MAX_DEPTH, slim

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=30,
)


def parsed(obj: Any) -> Any:
    """A fresh copy, as each watch line is parsed on its own."""
    return json.loads(json.dumps(obj))


def workload(name: str) -> dict[str, Any]:
    return {
        "metadata": {
            "name": name,
            "namespace": "ns",
            "uid": f"uid-{name}",
            "resourceVersion": "7",
            "managedFields": [{"manager": "kubectl"}],
        },
        "status": {"conditions": [{"type": "Admitted", "status": "True", "message": "x" * 200}]},
    }


@given(JSON)
def test_content_is_kept(value: Any) -> None:
    obj = {"metadata": {"name": "a"}, "spec": value}
    assert slim(parsed(obj)) == obj


def test_managed_fields_are_dropped() -> None:
    assert "managedFields" not in slim(parsed(workload("a")))["metadata"]


def test_repeated_strings_are_one_object() -> None:
    a, b = slim(parsed(workload("a"))), slim(parsed(workload("b")))
    key_a = next(k for k in a["status"]["conditions"][0] if k == "status")
    key_b = next(k for k in b["status"]["conditions"][0] if k == "status")
    assert key_a is key_b
    assert a["status"]["conditions"][0]["status"] is b["status"]["conditions"][0]["status"]
    assert a["metadata"]["namespace"] is b["metadata"]["namespace"]


def test_unique_and_long_values_are_not_interned() -> None:
    a, b = slim(parsed(workload("a"))), slim(parsed(workload("a")))
    assert a["metadata"]["uid"] == b["metadata"]["uid"]
    assert a["metadata"]["uid"] is not b["metadata"]["uid"]
    assert a["status"]["conditions"][0]["message"] is not b["status"]["conditions"][0]["message"]


def test_deep_objects_are_kept_whole() -> None:
    deep: Any = "leaf"
    for _ in range(MAX_DEPTH * 3):
        deep = {"d": [deep]}
    obj = {"metadata": {"name": "a"}, "spec": deep}
    assert slim(parsed(obj)) == obj
