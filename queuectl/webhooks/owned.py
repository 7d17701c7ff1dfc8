"""Our keys are ours: the one rule every validating webhook applies to the keys queuectl writes.

A request that adds, changes or removes one of queuectl's labels, annotations or scheduling gates
(the registry, queuectl/api/owned.py) is refused unless it comes from the controller, whatever
the object: a queued job, a child of one (a JobSet's Job, a RayJob's RayCluster), a pod. The
keys are read on the object's own metadata, in every pod template the object's kind holds (owned
keys there end up on pods), and on a pod's scheduling gates.

Two writers besides the controller are legitimate:
- an operator copying its parent's template into a child (JobSet into its Jobs, a Job into its
  pods): a value the verified controller owner's pod template carries for the same key may be
  written (the owner's keys are guarded by this same rule, so nothing new enters this way);
- queuectl's own mutating webhook, which writes the keys of `owned.SET_BY_MUTATION` into a
  user's CREATE; each is checked by its own rule there (webhooks/inputs.py).
Pure functions of (request, lookup), like the rest of the decisions.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from queuectl.api import names, owned
from queuectl.api.resource import Obj
from queuectl.api.views import ObjectView
from queuectl.jobs import JobKind, ReadsInputs
from queuectl.jobs.registry import KINDS, Registry
from queuectl.webhooks.lookup import QueueLookup
from queuectl.webhooks.review import Request

LABEL, ANNOTATION, GATE = "label", "annotation", "scheduling gate"


@dataclass(frozen=True)
class KeyChange:
    """One owned key a request adds (old None), changes, or removes (new None)."""

    what: str
    """LABEL, ANNOTATION or GATE."""
    key: str
    old: str | None
    new: str | None
    template: str | None = None
    """The pod set whose pod template holds it; None for the object's own metadata."""

    def describe(self, creating: bool = False) -> str:
        if self.what == GATE:
            return (
                f"the scheduling gate {self.key} is lifted by queuectl once the pod's group is "
                "admitted; see why it waits with `kubectl get workloads` in its namespace"
            )
        where = f" in the pod template of {self.template!r}" if self.template else ""
        if self.old is None and creating:
            return f"{self.what} {self.key}{where} is set by queuectl only; leave it out"
        if self.old is None:
            return f"{self.what} {self.key}{where} is managed by queuectl; leave it out"
        if self.new is None:
            return (
                f"{self.what} {self.key}{where} is managed by queuectl; put it back as it was "
                f"({self.old!r})"
            )
        return (
            f"{self.what} {self.key}{where} is managed by queuectl; leave it as it is "
            f"({self.old!r})"
        )


def _meta(obj: Any, field: str) -> Mapping[str, Any]:
    """A map under the object's metadata; {} where any step is missing or of another type (a
    template of a hand-made review may be anything)."""
    meta = obj.get("metadata") if isinstance(obj, Mapping) else None
    found = meta.get(field) if isinstance(meta, Mapping) else None
    return found if isinstance(found, Mapping) else {}


def _text(value: Any) -> str | None:
    return None if value is None else str(value)


def _metadata_changes(
    old: Mapping[str, Any] | None, new: Mapping[str, Any] | None, template: str | None
) -> Iterator[KeyChange]:
    for what, field, keys in (
        (LABEL, "labels", owned.OWNED_LABELS),
        (ANNOTATION, "annotations", owned.OWNED_ANNOTATIONS),
    ):
        before, after = _meta(old, field), _meta(new, field)
        for key in sorted(keys):
            was, now = _text(before.get(key)), _text(after.get(key))
            if was != now:
                yield KeyChange(what, key, was, now, template)


def templates(kind: JobKind | None, obj: Obj | None) -> dict[str, Mapping[str, Any]]:
    """The object's pod templates by pod set name (none for a pod or an unknown kind). A body
    whose pod sets cannot be read comes only from a review sent by hand (the API server decodes
    objects against their schema first): it has no templates to judge."""
    if kind is None or not obj:
        return {}
    try:
        return {ps.name: ps.template for ps in kind.pod_sets(dict(obj))}
    except (TypeError, ValueError, AttributeError, KeyError):
        return {}


def _gates(obj: Mapping[str, Any] | None) -> set[str]:
    gates = ((obj or {}).get("spec") or {}).get("schedulingGates")
    if not isinstance(gates, list):
        return set()
    return {str(g.get("name")) for g in gates if isinstance(g, Mapping)}


def owned_key_changes(old: Obj | None, new: Obj, kind: JobKind | None = None) -> list[KeyChange]:
    """Every owned key that going from `old` (None on CREATE) to `new` adds, changes or removes:
    on the object's metadata, in each pod template of `kind`'s pod sets, and (for a pod,
    `kind` None) the removal of one of our scheduling gates."""
    changes = [
        c
        for c in _metadata_changes(old, new, None)
        if not (old is None and isinstance(kind, ReadsInputs) and c.key in owned.SET_BY_MUTATION)
    ]
    before, after = templates(kind, old), templates(kind, new)
    for name in dict.fromkeys([*before, *after]):
        changes += _metadata_changes(before.get(name), after.get(name), name)
    if kind is None and old is not None:
        changes += [
            KeyChange(GATE, gate, gate, None)
            for gate in sorted((_gates(old) - _gates(new)) & owned.OWNED_GATES)
        ]
    return changes


@dataclass(frozen=True)
class _Owner:
    """What a verified owner may pass on to the objects it makes."""

    templates: list[Mapping[str, Any]]
    workload: frozenset[str | None] = frozenset()
    """The owner's Workload name: what queuectl labels the templates it places with, also
    where the kind's pod sets do not show it (a TrainJob's label sits in its overrides)."""


def _owner(obj: Obj, namespace: str, lookup: QueueLookup, kinds: Registry) -> _Owner:
    """The object's controller owner when that owner is a registered kind that exists in the
    cache with the uid the reference names; an empty one when it is not."""
    for ref in _meta_list(obj, "ownerReferences"):
        if not ref.get("controller"):
            continue
        kind = kinds.for_owner(ref)
        if kind is None:
            return _Owner([])
        owner = lookup.input_object(kind.resource, namespace, str(ref.get("name") or ""))
        uid = ObjectView(owner).meta.get("uid") if owner is not None else None
        if owner is None or not uid or uid != ref.get("uid"):
            return _Owner([])
        found = list(templates(kind, owner).values())
        if not kind.queue_name(dict(owner)):
            return _Owner(found)  # not queued: its Workload name is no label of ours yet
        named = _text(_meta(owner, "labels").get(names.LABEL_WORKLOAD))
        return _Owner(found, frozenset({named, _workload(kind, owner)}))
    return _Owner([])


def _workload(kind: JobKind, owner: Obj) -> str | None:
    try:
        return kind.workload_name(dict(owner))
    except (TypeError, ValueError, AttributeError, KeyError):
        return None


def _meta_list(obj: Obj, field: str) -> list[Mapping[str, Any]]:
    meta = obj.get("metadata")
    found = meta.get(field) if isinstance(meta, Mapping) else None
    return [r for r in found if isinstance(r, Mapping)] if isinstance(found, list) else []


def _copied(change: KeyChange, owner: _Owner) -> bool:
    """Whether the change writes what the owner's templates hold: a value one of them carries
    (or, for the Workload label, the owner's Workload name), or the key's removal when none of
    them carries it."""
    field = {LABEL: "labels", ANNOTATION: "annotations"}.get(change.what)
    if field is None or not owner.templates:
        return False
    values = [_text(_meta(t, field).get(change.key)) for t in owner.templates]
    if change.new is None:
        return all(v is None for v in values)
    if change.what == LABEL and change.key == names.LABEL_WORKLOAD and change.new in owner.workload:
        return True
    return change.new in values


async def read_owner(request: Request, lookup: QueueLookup, kinds: Registry = KINDS) -> None:
    """Before a CREATE is decided: the registered controller owner it names, when the cache
    lacks it, is read from the API server (an operator creates a child right after its parent
    changed, and pods right after their Job)."""
    obj = request.get("object")
    if request.get("operation") != "CREATE" or not isinstance(obj, dict):
        return
    for ref in _meta_list(obj, "ownerReferences"):
        if ref.get("controller") and (kind := kinds.for_owner(ref)) is not None:
            ns, name = str(request.get("namespace") or ""), str(ref.get("name") or "")
            if lookup.input_object(kind.resource, ns, name) is None:
                await lookup.read_input(kind.resource, ns, name)
            return


def owned_key_problems(
    request: Request, lookup: QueueLookup, kind: JobKind | None, kinds: Registry = KINDS
) -> list[str]:
    """Refusals for a request from anyone but the controller (the caller checks who): each
    owned key it adds, changes or removes, but for a copy from the verified owner's template."""
    new, old = request.get("object"), request.get("oldObject")
    if not isinstance(new, dict) or request.get("operation") not in ("CREATE", "UPDATE"):
        return []
    changes = owned_key_changes(old if isinstance(old, dict) else None, new, kind)
    if not changes:
        return []
    ns = str(request.get("namespace") or ObjectView(new).namespace)
    from_owner = _owner(new, ns, lookup, kinds)
    creating = request.get("operation") == "CREATE"
    return [c.describe(creating) for c in changes if not _copied(c, from_owner)]
