"""Placing a job's children that its operator does not place (`PlacesChildren`).

mpi-operator v0.6.0 makes an MPIJob's launcher Job while the MPIJob waits, suspended with it,
and on resume only unsuspends it: the placement the controller writes into the MPIJob never
reaches the launcher's pod. So, before starting such a job, the controller patches each child
the kind names (docs/design/jobs.md, "MPIJob"). The child is suspended with its job, so the
API server lets its scheduling directives and labels change.
"""

from __future__ import annotations

from collections.abc import Sequence

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
) -> None:
    """Patch each child the kind names that is not placed yet. A child that does not exist
    (yet) is made by the operator from the job's placed template, after the start. Decided
    from the Workload alone, so the patch is guarded by the child's uid only (no race lost
    to the Job controller's status writes)."""
    if not isinstance(adapter, PlacesChildren):
        return
    ns = ObjectView(job).namespace
    for resource, name in adapter.placed_children(job):
        child = cache.get(resource, name, ns)
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
            raise
        cache.store(resource).upsert_local(new)
        writes.count("children_placed")
