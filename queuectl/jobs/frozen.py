"""What a job holding quota may not change: the fields that decide what runs or where.

One function for every kind, `frozen(kind, job)`, built from what each kind already provides:
per pod set its count and template (`JobKind.pod_sets`, with `PodSet.path` naming where the
template sits) and the kind's other deciding fields (`FreezesFields`). Two views are equal
exactly when nothing that decides what runs or where differs: counts, requests and limits, the
topology request, and placement (nodeSelector, node affinity, tolerations, nodeName, the GPU
resource that serves `nvidia.com/gpu`). The validating webhook refuses a difference while the
job's Workload holds quota (`shape.shape_changes` words the count, resource and topology part,
`placement_changes` the rest); the controller evicts one that slipped past (drift.py).

A child an operator makes from its owner (`MakesChildren`: a JobSet's Jobs, a RayJob's
RayCluster) is held to its owner instead: a change to one of its deciding fields must make it
agree with the owner as the operator renders it now (`child_problems`). That lets the operators
do their job (JobSet copies the nodeSelector and tolerations of its template onto its Jobs on
resume, KubeRay makes the RayCluster from the RayJob) and nobody else move a child away from
what its owner's Workload was admitted for (docs/design/webhooks.md, "Frozen while admitted").
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Final

from queuectl.api import names
from queuectl.api.resource import Obj
from queuectl.api.views import ObjectView
from queuectl.jobs.kind import FreezesFields, JobKind, MakesChildren, PodSet


def _spec(template: Mapping[str, Any]) -> Mapping[str, Any]:
    spec = template.get("spec")
    return spec if isinstance(spec, Mapping) else {}


def _annotation(key: str) -> Callable[[Mapping[str, Any]], Any]:
    def read(template: Mapping[str, Any]) -> Any:
        meta = template.get("metadata")
        annotations = (meta.get("annotations") if isinstance(meta, Mapping) else None) or {}
        return annotations.get(key) if isinstance(annotations, Mapping) else None

    return read


def _node_affinity(template: Mapping[str, Any]) -> Any:
    affinity = _spec(template).get("affinity")
    return affinity.get("nodeAffinity") if isinstance(affinity, Mapping) else None


PLACEMENT: Final[tuple[tuple[str, Callable[[Mapping[str, Any]], Any]], ...]] = (
    ("spec.nodeSelector", lambda t: _spec(t).get("nodeSelector") or None),
    ("spec.affinity.nodeAffinity", _node_affinity),
    ("spec.tolerations", lambda t: _spec(t).get("tolerations") or None),
    ("spec.nodeName", lambda t: _spec(t).get("nodeName") or None),
    (
        f"metadata.annotations[{names.ANNOTATION_GPU_RESOURCE}]",
        _annotation(names.ANNOTATION_GPU_RESOURCE),
    ),
)
"""Where a pod template says which nodes (so which flavor) its pods run on: field path (inside
the template) -> how to read it. Pod affinity is left out: it narrows placement within what the
node affinity allows, and JobSet's exclusive placement writes it into its Jobs."""


def _canon(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=str)


@dataclass(frozen=True)
class FrozenPodSet:
    name: str
    where: str
    """The template's field path in the job, or `pod set NAME's template`."""
    count: int
    resources: str
    topology: tuple[str | None, ...]
    placement: tuple[tuple[str, str], ...]
    """(field path inside the template, its value as canonical JSON), in `PLACEMENT` order."""


@dataclass(frozen=True)
class FrozenView:
    """Everything of a job that decides what runs or where; compare two with ==."""

    pod_sets: tuple[FrozenPodSet, ...]
    fields: tuple[tuple[str, str], ...]
    """The kind's own deciding fields (`FreezesFields`): path -> canonical JSON."""


def where(ps: PodSet) -> str:
    return ps.path or f"pod set {ps.name!r}'s template"


def _pod_set(ps: PodSet) -> FrozenPodSet:
    spec = _spec(ps.template)
    resources = (
        [(c.get("name"), c.get("resources")) for c in spec.get("containers") or ()],
        [
            (c.get("name"), c.get("resources"), c.get("restartPolicy"))
            for c in spec.get("initContainers") or ()
        ],
        spec.get("overhead"),
    )
    topology = tuple(_annotation(key)(ps.template) for key in names.PODSET_TOPOLOGY_ANNOTATIONS)
    placement = tuple((path, _canon(read(ps.template))) for path, read in PLACEMENT)
    return FrozenPodSet(ps.name, where(ps), ps.count, _canon(resources), topology, placement)


def frozen(kind: JobKind, job: Mapping[str, Any] | None) -> FrozenView:
    """The job's frozen view (an absent job reads as an empty one). Requests and limits are
    read as written, not canonical: rewriting `1` as `1000m` is a change a user made."""
    obj = dict(job or {})
    fields: tuple[tuple[str, str], ...] = ()
    if isinstance(kind, FreezesFields):
        fields = tuple(sorted((k, _canon(v)) for k, v in kind.frozen_fields(obj).items()))
    return FrozenView(tuple(_pod_set(ps) for ps in kind.pod_sets(obj)), fields)


def placement_changes(
    kind: JobKind, old: Mapping[str, Any] | None, new: Mapping[str, Any] | None
) -> list[str]:
    """The field paths an update changes that decide where the job runs (placement, and the
    kind's own deciding fields); the count, resource and topology part is `shape_changes`'s."""
    before, after = frozen(kind, old), frozen(kind, new)
    out: list[str] = []
    if [p.name for p in before.pod_sets] == [p.name for p in after.pod_sets]:
        for was, now in zip(before.pod_sets, after.pod_sets, strict=True):
            out += [
                f"{now.where}.{path}"
                for (path, a), (_, b) in zip(was.placement, now.placement, strict=True)
                if a != b
            ]
    old_fields, new_fields = dict(before.fields), dict(after.fields)
    out += [
        path
        for path in sorted({*old_fields, *new_fields})
        if old_fields.get(path) != new_fields.get(path)
    ]
    return out


# --- a child and its owner ---------------------------------------------------------------
Agrees = Callable[[Any, Any, Any], bool]
"""(the child's new value, its old value (None on create), the owner's) -> whether it agrees."""


def _equal(new: Any, old: Any, owner: Any) -> bool:
    return bool(new == owner)


def _selector_agrees(new: Any, old: Any, owner: Any) -> bool:
    """Every key of the owner's nodeSelector, with its value. More keys only narrow placement,
    and JobSet merges its template's selector into its Jobs' (old keys stay)."""
    new, owner = dict(new or {}), dict(owner or {})
    return all(new.get(k) == v for k, v in owner.items())


def _tolerations_agree(new: Any, old: Any, owner: Any) -> bool:
    """Every toleration of the owner's, and none it did not have and the owner does not give
    (JobSet adds its template's tolerations to its Jobs' and keeps theirs)."""
    new, old, owner = list(new or []), list(old or []), list(owner or [])
    return all(t in new for t in owner) and all(t in owner or t in old for t in new)


_QUANTITY: Final = re.compile(r"^([+-]?[0-9.]+)([eE][+-]?[0-9]+|[a-zA-Z]*)$")
_SUFFIX: Final = {
    **{"": 1, "n": Fraction(1, 10**9), "u": Fraction(1, 10**6), "m": Fraction(1, 1000)},
    **{s: 1000**i for i, s in enumerate("kMGTPE", 1)},
    **{f"{s}i": 1024**i for i, s in enumerate("KMGTPE", 1)},
}


def _amount(value: Any) -> Any:
    """A quantity as a number (`0.5` and `500m` agree: the API server rewrites a Job's
    quantities canonical, a custom resource's as written); anything unreadable as itself."""
    match = _QUANTITY.match(str(value).strip())
    if match is None:
        return str(value)
    number, suffix = match.groups()
    try:
        if suffix[:1] in ("e", "E"):
            return Fraction(number) * Fraction(10) ** int(suffix[1:])
        return Fraction(number) * _SUFFIX[suffix] if suffix in _SUFFIX else str(value)
    except (ValueError, ZeroDivisionError):
        return str(value)


def _resources(template: Mapping[str, Any]) -> tuple[Any, ...]:
    """Each container's requests and limits as amounts (containers that set none left out),
    and the overhead: what one pod asks for, in any spelling."""

    def amounts(found: Any) -> tuple[tuple[str, Any], ...]:
        items = found.items() if isinstance(found, Mapping) else ()
        return tuple(sorted((str(k), _amount(v)) for k, v in items))

    def of(containers: Any) -> tuple[Any, ...]:
        out = []
        for c in containers if isinstance(containers, list) else ():
            res = (c.get("resources") if isinstance(c, Mapping) else None) or {}
            if isinstance(res, Mapping) and (res.get("requests") or res.get("limits")):
                out.append(
                    (c.get("name"), amounts(res.get("requests")), amounts(res.get("limits")))
                )
        return tuple(out)

    spec = _spec(template)
    return of(spec.get("containers")), of(spec.get("initContainers")), amounts(spec.get("overhead"))


def _read(path: str) -> Callable[[PodSet], Any]:
    read = dict(PLACEMENT)[path]
    return lambda ps: read(ps.template)


def _topology(key: str) -> Callable[[PodSet], Any]:
    read = _annotation(key)
    return lambda ps: read(ps.template)


CHILD_FIELDS: Final[tuple[tuple[str, Callable[[PodSet], Any], Agrees], ...]] = (
    ("(pods at once)", lambda ps: ps.count, _equal),
    ("(requests and limits of one pod)", lambda ps: _resources(ps.template), _equal),
    *(
        (f"metadata.annotations[{key}]", _topology(key), _equal)
        for key in names.PODSET_TOPOLOGY_ANNOTATIONS
    ),
    ("spec.nodeSelector", _read("spec.nodeSelector"), _selector_agrees),
    ("spec.affinity.nodeAffinity", _read("spec.affinity.nodeAffinity"), _equal),
    ("spec.tolerations", _read("spec.tolerations"), _tolerations_agree),
    ("spec.nodeName", _read("spec.nodeName"), _equal),
    (
        f"metadata.annotations[{names.ANNOTATION_GPU_RESOURCE}]",
        _read(f"metadata.annotations[{names.ANNOTATION_GPU_RESOURCE}]"),
        _equal,
    ),
)
"""What a child must agree on with the pod set of its owner it is made from. Requests and
limits are compared as amounts: a Job's are stored canonical, its JobSet's as written."""


def _field(ps: PodSet, label: str) -> str:
    if label.startswith("("):
        return f"{where(ps)} {label}"
    return f"{where(ps)}.{label}"


def child_problems(
    owner_kind: JobKind, owner: Obj, child_what: str, old: Obj | None, new: Obj
) -> list[str]:
    """Why a CREATE (`old` None) or UPDATE of a child of `owner` is refused: a deciding field
    it sets or changes that departs from what the owner says, or a child the owner does not
    make. Empty when the child agrees (or the update leaves every deciding field as it was)."""
    meta = ObjectView(owner).meta
    who = f"{owner_kind.resource.kind} {meta.get('name')!r}"
    pairs = owner_kind.child_pod_sets(owner, new) if isinstance(owner_kind, MakesChildren) else None
    if pairs is None:
        return [
            f"it names {who} as its controller, but {who} makes no such {child_what} (another "
            "name, or a part it does not have); only the operator of that "
            f"{owner_kind.resource.kind} creates its {child_what}s: remove the ownerReference "
            "to queue it on its own"
        ]
    before: dict[str, PodSet] = {}
    if old is not None and isinstance(owner_kind, MakesChildren):
        before = {c.name: c for c, _ in owner_kind.child_pod_sets(owner, old) or ()}
    problems = []
    for child, parent in pairs:
        was = before.get(child.name)
        for label, read, agrees in CHILD_FIELDS:
            value, prior = read(child), (read(was) if was is not None else None)
            if was is not None and value == prior:
                continue  # not changed by this request
            if agrees(value, prior, read(parent)):
                continue
            problems.append(
                f"{_field(child, label)} ({_canon(value)}) departs from {who}'s "
                f"{_field(parent, label)} ({_canon(read(parent))})"
            )
    if problems:
        problems.append(
            f"the {child_what} runs what {who} was admitted for, and its operator keeps it so; "
            f"change {who} instead (it may change while it waits), or delete it and create it "
            "again"
        )
    return problems


def pairs_by_name(
    child: Sequence[PodSet], owner: Sequence[PodSet]
) -> list[tuple[PodSet, PodSet]] | None:
    """The child's pod sets each with the owner's of the same name; None when the child has
    one the owner does not (a worker group of its own)."""
    by_name = {ps.name: ps for ps in owner}
    if any(ps.name not in by_name for ps in child):
        return None
    return [(ps, by_name[ps.name]) for ps in child]
