"""Every job kind queuectl queues, registered once: the controller watches them, the webhooks
admit them, and the webhook rules and RBAC are rendered from them.

Adding a kind is its package under queuectl/jobs/ and one line in `KINDS` below
(docs/design/jobs.md). A kind outside the tree (an operator's own CRD) is loaded with
`queuectl controller --job-kind MODULE:ATTR`.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, Final

from queuectl.api.resource import Resource
from queuectl.api.views import ObjectView
from queuectl.jobs.batch import BatchJob
from queuectl.jobs.jobset import JobSet
from queuectl.jobs.kind import JobKind, MakesChildren, PlacesChildren, ReadsInputs
from queuectl.jobs.mpi import MPIJob
from queuectl.jobs.pytorch import PyTorchJob
from queuectl.jobs.ray import RayCluster, RayJob
from queuectl.jobs.trainjob import TrainJob


class Registry(Mapping[str, JobKind]):
    """Kind name ('Job', 'JobSet') -> kind; also found by (group, kind) and by Resource.

    Kind names are unique across groups: a Workload's owner and the controller's work keys
    name a kind by its Kind, so two groups' 'Job' would be ambiguous and are refused."""

    def __init__(self, kinds: Iterable[JobKind]) -> None:
        self._by_name: dict[str, JobKind] = {}
        for kind in kinds:
            name = kind.resource.kind
            if name in self._by_name:
                raise ValueError(
                    f"job kind {name} registered twice ({self._by_name[name].resource.group} "
                    f"and {kind.resource.group}); kind names must be unique"
                )
            self._by_name[name] = kind

    def __getitem__(self, name: str) -> JobKind:
        return self._by_name[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._by_name)

    def __len__(self) -> int:
        return len(self._by_name)

    def kinds(self) -> list[JobKind]:
        return list(self._by_name.values())

    def for_group_kind(self, group: str, kind: str) -> JobKind | None:
        """The kind an AdmissionReview's `kind` (group, version, kind) names, if registered."""
        found = self._by_name.get(kind)
        return found if found is not None and found.resource.group == group else None

    def for_resource(self, resource: Resource) -> JobKind | None:
        found = self._by_name.get(resource.kind)
        return found if found is not None and found.resource == resource else None

    def for_owner(self, ref: Mapping[str, Any]) -> JobKind | None:
        """The kind an ownerReference points to (its apiVersion's group and its kind)."""
        api_version = str(ref.get("apiVersion") or "")
        group = api_version.rpartition("/")[0]
        return self.for_group_kind(group, str(ref.get("kind") or ""))

    def with_kinds(self, *more: JobKind) -> Registry:
        """This registry plus `more` (kinds loaded from outside the tree, fakes in tests)."""
        return Registry([*self.kinds(), *more])


Find = Callable[[Resource, str, str], Mapping[str, Any] | None]
"""(resource, namespace, name) -> the object, None when it does not exist (a cache read)."""
MAX_OWNER_DEPTH: Final = 3
"""A TrainJob's JobSet's Job is the deepest chain the registered kinds make."""


def controlled_by(
    job: Mapping[str, Any], kinds: Mapping[str, JobKind], find: Find | None = None
) -> JobKind | None:
    """The registered kind whose object controls `job` (a JobSet's child Job, a TrainJob's
    JobSet), if any (`owner`)."""
    found = owner(job, kinds, find)
    return None if found is None else found[0]


def queued_whole(adapter: JobKind, job: dict[str, Any], kinds: Mapping[str, JobKind]) -> bool:
    """Whether `job` is queued as a job of its own: it names a queue and no registered kind
    controls it (a JobSet's child Job is covered by its JobSet's Workload). One rule for the
    watch's filter and for the worker, which asks again because the job may have changed
    between its event and the worker's turn."""
    return adapter.queue_name(job) is not None and controlled_by(job, kinds) is None


def placing_owner(child: Mapping[str, Any], kinds: Mapping[str, JobKind]) -> tuple[str, str] | None:
    """(kind, name) of the job that controls `child` and places it (`PlacesChildren`), if any.
    Such a child is never queued, but its events matter to its owner: its operator may make
    it from the job's template just before the job is placed, and then only unsuspend it."""
    ref = ObjectView(child).controller_ref
    if not ref:
        return None
    found = owner(child, kinds)
    if found is None or not isinstance(found[0], PlacesChildren):
        return None
    return str(ref.get("kind")), str(ref.get("name") or "")


def owner(
    job: Mapping[str, Any], kinds: Mapping[str, JobKind], find: Find | None = None, depth: int = 0
) -> tuple[JobKind, Mapping[str, Any] | None] | None:
    """The registered kind whose object controls `job`, and that object. Such a job is never
    queued on its own: its owner is the one queued, and queueing both (a default LocalQueue
    would) would hold the child suspended after its owner was admitted, and count its pods
    twice.

    With `find` (the webhooks) the claim is verified, since anyone may write an
    ownerReference: the owner exists with the uid the reference names, its kind makes objects
    of this one's kind (`MakesChildren.children`), and it is queued (its queue label, or it is
    itself such a child of a queued owner). Anything less is no owner: the object is judged
    as any other of its kind. "Queued" rather than "has a Workload": a JobSet makes its Jobs
    at once, before the controller has written the JobSet's Workload. Without `find` (the
    controller) the claim is taken as written: the webhook has already judged it, and a
    child refused there never runs."""
    meta = ObjectView(job).meta
    for ref in meta.get("ownerReferences") or ():
        if not ref.get("controller"):
            continue
        found = kinds.get(str(ref.get("kind") or ""))
        group = str(ref.get("apiVersion") or "").rpartition("/")[0]
        if found is None or found.resource.group != group:
            continue
        if find is None:
            return found, None
        obj = find(found.resource, str(meta.get("namespace") or ""), str(ref.get("name") or ""))
        if obj is None or not ref.get("uid"):
            return None
        if ObjectView(obj).meta.get("uid") != ref.get("uid"):
            return None  # another object of that name: not the one the reference meant
        if not _makes(found, job) or depth >= MAX_OWNER_DEPTH:
            return None
        if found.queue_name(dict(obj)) is None and owner(obj, kinds, find, depth + 1) is None:
            return None  # an owner queuectl does not queue puts nothing of its under quota
        return found, obj
    return None


def _makes(kind: JobKind, child: Mapping[str, Any]) -> bool:
    if not isinstance(kind, MakesChildren):
        return False
    group = str(child.get("apiVersion") or "").rpartition("/")[0]
    return any(r.kind == child.get("kind") and r.group == group for r in kind.children)


def input_resources(kinds: Iterable[JobKind]) -> tuple[Resource, ...]:
    """Every resource the kinds read their pod sets from (`ReadsInputs.inputs`: a TrainJob's
    runtimes), once each: the controller watches them and its RBAC may read them."""
    found = (r for kind in kinds if isinstance(kind, ReadsInputs) for r in kind.inputs)
    return tuple(dict.fromkeys(found))


def load_kind(spec: str) -> JobKind:
    """A kind from `module:attribute` (a JobKind instance, or a class made with no arguments);
    a clear error when the module or attribute is missing."""
    module_name, _, attr = spec.partition(":")
    if not module_name or not attr:
        raise ValueError(f"job kind {spec!r}: expected MODULE:ATTRIBUTE, e.g. mypkg.kinds:MyJob")
    try:
        found = getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as err:
        raise ValueError(f"job kind {spec!r}: {err}") from err
    kind = found() if isinstance(found, type) else found
    if not isinstance(getattr(kind, "resource", None), Resource):
        raise ValueError(f"job kind {spec!r}: {found!r} has no `resource`; is it a JobKind?")
    return kind  # type: ignore[no-any-return]


KINDS = Registry(
    [
        BatchJob(),
        JobSet(),
        RayJob(),
        RayCluster(),
        PyTorchJob(),
        MPIJob(),
        TrainJob(),
    ]
)
"""Every kind queuectl queues: one line per kind."""
