"""Reading one Kueue document field by field, so that nothing is left behind unreported.

`Fields` wraps a mapping: a converter `take`s what it carries over and `drop`s, with a reason,
what queuectl has no equivalent for; `finish` reports every key nobody read as unknown. A
Kueue release that adds a field therefore shows up in the report instead of vanishing.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from queuectl.kueue.report import Action, Report

SERVER_METADATA: Final = (
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "managedFields",
    "selfLink",
    "finalizers",
    "ownerReferences",
)
"""Metadata the API server or a controller writes: meaningless on a new object."""
LAST_APPLIED: Final = "kubectl.kubernetes.io/last-applied-configuration"
KUEUE_PREFIX: Final = "kueue.x-k8s.io/"


class Doc:
    """One Kueue document being converted: its name in notes, the report, its problems."""

    def __init__(self, label: str, kind: str, version: str, report: Report) -> None:
        self.label = label
        self.kind = kind
        self.version = version
        self.report = report
        self.problems: list[str] = []

    def note(self, path: str, action: Action, reason: str) -> None:
        self.report.note(self.label, path, action, reason)

    def problem(self, message: str) -> None:
        """A reason the document cannot be converted; the message says what to do."""
        self.problems.append(f"{self.label}: {message}")


class Fields:
    """A mapping read key by key (`path` is its place in the document, e.g. `spec`)."""

    def __init__(self, data: Any, path: str, doc: Doc) -> None:
        if data is not None and not isinstance(data, Mapping):
            doc.problem(f"{path} must be a mapping, not {type(data).__name__}")
            data = {}
        self.data: Mapping[str, Any] = data or {}
        self.path = path
        self.doc = doc
        self.read: set[str] = set()

    def at(self, key: str) -> str:
        return f"{self.path}.{key}" if self.path else key

    def has(self, key: str) -> bool:
        return key in self.data

    def take(self, key: str) -> Any:
        """The value (None when absent), marked as carried over."""
        self.read.add(key)
        return self.data.get(key)

    def sub(self, key: str) -> Fields:
        """A nested mapping, read the same way."""
        return Fields(self.take(key), self.at(key), self.doc)

    def drop(self, key: str, reason: str) -> Any:
        """A field queuectl has no equivalent for: reported when present, never carried."""
        self.read.add(key)
        value = self.data.get(key)
        if key in self.data:
            self.doc.note(self.at(key), Action.DROPPED, reason)
        return value

    def finish(self) -> None:
        """Report every key nobody read: a field this importer does not know."""
        for key in self.data:
            if key not in self.read:
                self.doc.note(
                    self.at(key),
                    Action.DROPPED,
                    f"not a field of Kueue {self.doc.kind} {self.doc.version} that this "
                    "importer knows (a newer Kueue release, or a typo that Kueue itself "
                    "would have pruned); left out",
                )


def metadata(meta: Fields, *, namespaced: bool) -> dict[str, Any]:
    """name (required), namespace for namespaced kinds, the user's labels and annotations."""
    doc = meta.doc
    out: dict[str, Any] = {}
    name = meta.take("name")
    if not isinstance(name, str) or not name:
        doc.problem("metadata.name is missing; every object needs a name to be applied")
    else:
        out["name"] = name
    if namespaced:
        if (ns := meta.take("namespace")) is not None:
            out["namespace"] = ns
        else:
            doc.note(
                "metadata.namespace",
                Action.KEPT,
                "not set in the Kueue manifest: `kubectl apply` puts the LocalQueue in its "
                "current namespace (or the one given with -n)",
            )
    else:
        meta.drop("namespace", f"a {doc.kind} is cluster-scoped; the namespace means nothing")
    meta.drop("generateName", "an applied object needs a fixed name (metadata.name)")
    for key, kept in (("labels", _labels(meta, "labels")), ("annotations", _annotations(meta))):
        if kept:
            out[key] = kept
    found = [k for k in SERVER_METADATA if meta.has(k)]
    for key in SERVER_METADATA:
        meta.read.add(key)
    if found:
        doc.note(
            "metadata",
            Action.DROPPED,
            f"{', '.join(found)}: written by the API server for the Kueue object; "
            "a new object gets its own",
        )
    meta.finish()
    return out


def _labels(meta: Fields, key: str) -> dict[str, str]:
    kept: dict[str, str] = {}
    for k, v in (meta.take(key) or {}).items():
        if k.startswith(KUEUE_PREFIX):
            meta.doc.note(
                f"metadata.{key}.{k}",
                Action.DROPPED,
                "a Kueue key that queuectl does not read",
            )
        else:
            kept[k] = v
    return kept


def _annotations(meta: Fields) -> dict[str, str]:
    kept = _labels(meta, "annotations")
    if kept.pop(LAST_APPLIED, None) is not None:
        meta.doc.note(
            f"metadata.annotations.{LAST_APPLIED}",
            Action.DROPPED,
            "it records the Kueue object; kubectl writes a new one on apply",
        )
    return kept


def quantity(value: Any) -> Any:
    """A quantity as queuectl's schema takes it: an unquoted YAML number like 0.5 becomes the
    string '0.5' (same value; queuectl refuses floats so that no quota is rounded)."""
    if isinstance(value, float):
        return repr(value)
    return value


def items(value: Any, path: str, doc: Doc) -> list[Any]:
    """A list field (None reads as empty); anything else is a problem of the document."""
    if value is None:
        return []
    if not isinstance(value, list):
        doc.problem(f"{path} must be a list, not {type(value).__name__}")
        return []
    return value


def present(d: dict[str, Any]) -> dict[str, Any]:
    """Without the keys whose value is None (absent in the Kueue manifest)."""
    return {k: v for k, v in d.items() if v is not None}
