"""Typed read views over objects as the API server sends them (plain JSON dicts).

The controller, the webhooks and the job kinds read tens of thousands of objects straight from
the watch; parsing each into a pydantic model would cost a copy per object (docs/design/
controller.md, "Dicts, not models, on the hot path"). A view wraps the dict and reads a field
when asked: nothing is parsed or copied, a missing section reads as empty, and each field has
one home here instead of a `.get("metadata") or {}` chain at every call site (kopf's
`Body`/`Meta`/`Spec` are the model).

Views are cheap to make (one slot) and are made where an object is read, not stored.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from queuectl.api import names
from queuectl.api.resource import Resource

Raw = Mapping[str, Any]


def _section(obj: Raw, name: str) -> Raw:
    """obj[name], or a new empty mapping when it is missing or null (never a shared one: a
    caller that writes into what it read must not write into every other object's)."""
    found: Raw | None = obj.get(name)
    return found or {}


class ObjectView:
    """Any Kubernetes object: its metadata, spec, status and conditions."""

    __slots__ = ("raw",)

    def __init__(self, raw: Raw) -> None:
        self.raw = raw

    @property
    def meta(self) -> Raw:
        return _section(self.raw, "metadata")

    @property
    def spec(self) -> Raw:
        return _section(self.raw, "spec")

    @property
    def status(self) -> Raw:
        return _section(self.raw, "status")

    @property
    def name(self) -> str:
        return str(self.meta.get("name") or "")

    @property
    def namespace(self) -> str:
        return str(self.meta.get("namespace") or "")

    @property
    def uid(self) -> str:
        return str(self.meta.get("uid") or "")

    @property
    def key(self) -> str:
        """`namespace/name` (`/name` for a cluster-scoped object); a nameless object raises
        KeyError, since a key that names nothing would be a bug downstream."""
        meta = self.meta
        return f"{meta.get('namespace', '')}/{meta['name']}"

    @property
    def labels(self) -> Mapping[str, str]:
        return _section(self.meta, "labels")

    @property
    def annotations(self) -> Mapping[str, str]:
        return _section(self.meta, "annotations")

    def annotation(self, key: str) -> str | None:
        value = self.annotations.get(key)
        return None if value is None else str(value)

    @property
    def deleting(self) -> bool:
        """Marked for deletion (a finalizer may still hold it)."""
        return bool(self.meta.get("deletionTimestamp"))

    @property
    def owner_refs(self) -> Sequence[Raw]:
        refs: Sequence[Raw] = self.meta.get("ownerReferences") or ()
        return refs

    @property
    def controller_ref(self) -> Raw | None:
        """The ownerReference marked `controller` (at most one, by the API's rules)."""
        return next((ref for ref in self.owner_refs if ref.get("controller")), None)

    @property
    def conditions(self) -> Sequence[Raw]:
        conditions: Sequence[Raw] = self.status.get("conditions") or ()
        return conditions

    def condition(self, type_: str) -> Raw | None:
        """The first condition of that type, True or not."""
        return next((c for c in self.conditions if c.get("type") == type_), None)

    def is_true(self, type_: str) -> bool:
        cond = self.condition(type_)
        return cond is not None and cond.get("status") == "True"

    @property
    def true_conditions(self) -> dict[str, Raw]:
        """Type -> condition, for the conditions whose status is "True" (what a job kind reads
        to tell how its object ended)."""
        return {str(c.get("type")): c for c in self.conditions if c.get("status") == "True"}


class WorkloadView(ObjectView):
    """A queuectl Workload: what it asks for, and where the controller has put it."""

    __slots__ = ()

    @classmethod
    def of_spec(cls, spec: Raw) -> WorkloadView:
        """A view of a Workload spec not written yet (what a job kind's `workload_spec` asks)."""
        return cls({"spec": spec})

    @property
    def queue_name(self) -> str:
        """spec.queueName: the LocalQueue in the Workload's namespace."""
        return str(self.spec.get("queueName") or "")

    @property
    def pod_sets(self) -> list[dict[str, Any]]:
        """spec.podSets as stored (JSON objects, which the job kinds' patches take)."""
        pod_sets: list[dict[str, Any]] = self.spec.get("podSets") or []
        return pod_sets

    @property
    def admission(self) -> Raw | None:
        """status.admission: the flavors and counts quota was reserved for, if any."""
        admission: Raw | None = self.status.get("admission") or None
        return admission

    @property
    def holds_quota(self) -> bool:
        """QuotaReserved and an admission on record, and not finished."""
        return (
            bool(self.status.get("admission"))
            and self.is_true(names.COND_QUOTA_RESERVED)
            and not self.is_true(names.COND_FINISHED)
        )

    @property
    def is_admitted(self) -> bool:
        """Holds quota and is Admitted: every admission check said Ready (the Job may run)."""
        return self.holds_quota and self.is_true(names.COND_ADMITTED)

    @property
    def requeued_for_node_failure(self) -> bool:
        """Requeued after an eviction for node failures: it goes ahead of its peers (the loss
        was the node's fault, not its own), until admitted again."""
        cond = self.condition(names.COND_REQUEUED)
        return (
            cond is not None
            and cond.get("status") == "True"
            and cond.get("reason") == names.REASON_EVICTED_NODE_FAILURES
        )


def owner_reference(
    obj: Raw,
    resource: Resource,
    *,
    controller: bool | None = True,
    block_owner_deletion: bool | None = None,
) -> dict[str, Any]:
    """An ownerReference naming `obj` (of kind `resource`): the garbage collector deletes what
    carries it when `obj` goes. `controller` marks the one owner that manages it; None leaves
    either field out."""
    view = ObjectView(obj)
    ref: dict[str, Any] = {
        "apiVersion": resource.api_version,
        "kind": resource.kind,
        "name": view.meta["name"],
        "uid": view.meta["uid"],
    }
    if controller is not None:
        ref["controller"] = controller
    if block_owner_deletion is not None:
        ref["blockOwnerDeletion"] = block_owner_deletion
    return ref
