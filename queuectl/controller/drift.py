"""Where a job and its Workload disagree: its shape (pod sets, pods, requests, topology) or its
queue. Pure, but for `follow_job`, the one write.

A Workload holding quota must describe its job exactly, or more could run than was admitted:
the reconciler evicts such a Workload and resizes it once its quota is released. A waiting
Workload simply follows its job (docs/design/controller.md, "A job that changes").
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from queuectl.api import names
from queuectl.controller import kube as k
from queuectl.controller.cache import Cache
from queuectl.controller.kube import Kube, KubeError, Obj
from queuectl.convert import pod_requests
from queuectl.jobs import JobKind

Topology = tuple[str | None, str | None, str | None]
"""required, preferred, podSetGroupName"""
PodSetShape = tuple[str, int, tuple[tuple[str, int], ...], Topology]


def pod_set_shapes(pod_sets: Sequence[Mapping[str, Any]]) -> tuple[PodSetShape, ...]:
    """What quota is sized for: per pod set its name, count, one pod's requests (canonical,
    so `1` and `1000m` agree) and topology request. The rest of the template does not count."""
    shapes = []
    for ps in pod_sets:
        pod_spec = (ps.get("template") or {}).get("spec") or {}
        topo = ps.get("topologyRequest") or {}
        shapes.append(
            (
                str(ps.get("name") or "main"),
                int(ps.get("count", 1)),
                tuple(sorted(pod_requests(pod_spec).items())),
                (topo.get("required"), topo.get("preferred"), topo.get("podSetGroupName")),
            )
        )
    return tuple(shapes)


def _describe(shape: Sequence[PodSetShape]) -> str:
    return ", ".join(
        f"{name}: {count} x {{{', '.join(f'{r}={v}' for r, v in requests)}}}"
        + (f" topology {'/'.join(t for t in topo if t)}" if any(topo) else "")
        for name, count, requests, topo in shape
    )


def drift(wanted: Mapping[str, Any], workload: Obj) -> list[str]:
    """How the Workload spec the job asks for now (`JobKind.workload_spec`) differs from the
    Workload's, in words; empty when the Workload still describes the job."""
    spec = workload.get("spec") or {}
    changes = []
    queue, old_queue = wanted.get("queueName") or "", spec.get("queueName") or ""
    if queue and queue != old_queue:  # a removed label (refused by the webhook) is not a move
        changes.append(f"queue {old_queue!r} -> {queue!r}")
    new_shape = pod_set_shapes(wanted.get("podSets") or ())
    old_shape = pod_set_shapes(spec.get("podSets") or ())
    if new_shape != old_shape:
        changes.append(f"pod sets [{_describe(old_shape)}] -> [{_describe(new_shape)}]")
    return changes


def follow_patch(workload: Obj, wanted: Mapping[str, Any]) -> dict[str, Any]:
    """A merge patch that makes a waiting Workload describe its job again (pod sets and queue),
    applied only to the version decided on (and refused by the CRD once it holds quota)."""
    meta = workload["metadata"]
    queue = wanted.get("queueName") or (workload.get("spec") or {}).get("queueName") or ""
    return {
        "metadata": {
            "resourceVersion": meta["resourceVersion"],
            "labels": {names.LABEL_QUEUE_NAME: queue},
        },
        "spec": {"podSets": wanted.get("podSets") or [], "queueName": queue},
    }


async def follow_job(
    kube: Kube, cache: Cache, adapter: JobKind, job: Obj, workload: Obj
) -> list[str]:
    """Make a waiting Workload take its job's current shape and queue (scaled, requests
    changed, relabelled to another LocalQueue), keeping its place in line. The caller passes a
    job whose template is its original (restored), so what placement injected is never copied.
    Returns the changes written; empty when there were none or the write lost a race (the
    Workload's next event brings the caller back)."""
    wanted = adapter.workload_spec(job)
    changes = drift(wanted, workload)
    if not changes:
        return []
    meta = workload["metadata"]
    try:
        new = await kube.patch(
            k.WORKLOADS, meta["name"], follow_patch(workload, wanted), meta["namespace"]
        )
    except KubeError as err:
        if err.not_found or err.conflict:
            return []
        raise
    cache.store(k.WORKLOADS).upsert_local(new)
    return changes
