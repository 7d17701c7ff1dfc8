"""Job kinds on the command line: `queuectl describe jobset NAME` names the object a user
submitted; the CLI finds the Workload queuectl made for it.

Every kind in the job-kind registry is describable under the names kubectl gives it: its kind
in lower case, its plural, and the plural qualified by its group (`jobset`, `jobsets`,
`jobsets.jobset.x-k8s.io`). `job` is batch/v1 Job, as in kubectl (docs/design/cli.md).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final, Protocol

from queuectl.api import names
from queuectl.api.resource import WORKLOADS, Resource
from queuectl.api.views import ObjectView, WorkloadView
from queuectl.cli._kube import CliError, Obj
from queuectl.jobs.kind import JobKind
from queuectl.jobs.registry import KINDS, Registry


class Api(Protocol):
    """The two calls finding a job's Workload takes (`_kube.Kube` has them)."""

    def get(self, kind: Resource, name: str, namespace: str | None = None) -> Obj: ...

    def list(self, kind: Resource, namespace: str | None = None) -> list[Obj]: ...


def canonical(kind: JobKind) -> str:
    """The name a user types for the kind: its Kind in lower case (`job`, `jobset`)."""
    return kind.resource.kind.lower()


def aliases(registry: Registry = KINDS) -> dict[str, tuple[str, ...]]:
    """canonical name -> every name kubectl accepts for the kind."""
    out: dict[str, tuple[str, ...]] = {}
    for kind in registry.values():
        r = kind.resource
        qualified = f"{r.plural}.{r.group}" if r.group else r.plural
        out[canonical(kind)] = tuple(dict.fromkeys((canonical(kind), r.plural, qualified)))
    return out


JOB_ALIASES: Final[Mapping[str, tuple[str, ...]]] = aliases()


def by_name(name: str, registry: Registry = KINDS) -> JobKind:
    return next(k for k in registry.values() if canonical(k) == name)


def workload_of_job(api: Api, name: str, ns: str, kind: JobKind | None = None) -> str:
    """The Workload queuectl made for job `name` of `kind` (batch Job by default): the
    `queuectl.io/workload` label the controller puts on the job, else a Workload in its
    namespace that the job owns."""
    kind = kind or KINDS["Job"]
    what = kind.resource.kind
    job = api.get(kind.resource, name, ns)  # "not found" / "denied" first, in the user's words
    meta = ObjectView(job).meta
    labels = meta.get("labels") or {}
    if labels.get(names.LABEL_WORKLOAD):
        return str(labels[names.LABEL_WORKLOAD])
    uid = meta.get("uid")
    for wl in api.list(WORKLOADS, ns):
        owners = WorkloadView(wl).owner_refs
        if any(o.get("kind") == what and o.get("uid") == uid for o in owners):
            return str(wl["metadata"]["name"])
    if not labels.get(names.LABEL_QUEUE_NAME):
        raise CliError(
            f'{what} "{name}" in namespace {ns} is not queued by queuectl: it has no '
            f"{names.LABEL_QUEUE_NAME} label (and its namespace no LocalQueue named default); "
            "label it with a LocalQueue to queue it"
        )
    raise CliError(
        f'{what} "{name}" in namespace {ns} has no Workload yet: the queuectl controller makes '
        f"one when it sees the {what}; check that it runs (`kubectl -n queuectl-system get pods`)"
    )
