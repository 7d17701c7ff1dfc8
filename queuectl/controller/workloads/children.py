"""Placing a job's children that its operator does not place (`PlacesChildren`).

mpi-operator v0.6.0 makes an MPIJob's launcher Job while the MPIJob waits, suspended with it,
and on resume only unsuspends it: the placement the controller writes into the MPIJob never
reaches the launcher's pod. So, before starting such a job, the controller patches each child
the kind names (docs/design/jobs.md, "MPIJob"). The child is suspended with its job, so the
API server lets its scheduling directives and labels change. The operator may have made the
child a moment before: a child the cache has not seen yet is read from the API server.

The operator may also make it after that read but from the MPIJob as it was before the start
(its own cache lags too). The child's events bring its job back here, and a child found
unplaced after the start is patched while it is still suspended; once started its template is
frozen, so the caller evicts the job and requeues it at its position: suspended, the operator
suspends the child, and the next start places it (deleting the child instead would need the
controller to delete any Job in the cluster).
"""

from __future__ import annotations

from collections.abc import Sequence

from queuectl.api.resource import Resource
from queuectl.api.views import ObjectView, WorkloadView
from queuectl.controller.watch.cache import Cache
from queuectl.controller.watch.kube import KubeError, Obj
from queuectl.controller.workloads.workload_writes import WorkloadWrites
from queuectl.jobs import JobKind, PlacesChildren, PodSetPlacement


async def place_children(
    writes: WorkloadWrites,
    cache: Cache,
    adapter: JobKind,
    job: Obj,
    wl: Obj,
    placed: Sequence[PodSetPlacement],
    *,
    started: bool = False,
) -> list[str]:
    """Patch each child the kind names that is not placed yet (before the job starts, or
    after it, `started`); return the children that started unplaced and cannot be patched any
    more (the API server refuses: their template is frozen). A child that
    does not exist (yet) is made by the operator from the job's placed template, after the
    start. Decided from the Workload alone, so the write is guarded by the child's uid only (no
    race lost to the Job controller's status writes)."""
    if not isinstance(adapter, PlacesChildren):
        return []
    ns = ObjectView(job).namespace
    frozen: list[str] = []
    for resource, name in adapter.placed_children(job):
        child = cache.get(resource, name, ns)
        if child is None and not started:
            child = await _read(writes, cache, resource, name, ns)
        if child is None:
            continue
        patch = adapter.child_run_patch(job, child, WorkloadView(wl).pod_sets, placed)
        if patch is None:
            continue
        meta = child["metadata"]
        body = {**patch, "metadata": {**patch.get("metadata", {}), "uid": meta["uid"]}}
        try:
            new = await writes.kube.patch(resource, name, body, ns)
        except KubeError as err:
            if err.not_found or err.conflict:
                continue  # gone (or made again): the operator makes it from the placed job
            if err.status != 422 or not started:
                raise
            frozen.append(f"{resource.kind} {name}")
            continue
        cache.store(resource).upsert_local(new)
        writes.count("children_placed")
    return frozen


async def _read(
    writes: WorkloadWrites, cache: Cache, resource: Resource, name: str, ns: str
) -> Obj | None:
    """The child as the API server has it now (the cache may not have its create yet)."""
    try:
        child = await writes.kube.get(resource, name, ns)
    except KubeError as err:
        if err.not_found:
            return None
        raise
    cache.store(resource).upsert_local(child)
    return child
