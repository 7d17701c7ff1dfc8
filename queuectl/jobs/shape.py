"""A job's shape, what its Workload's quota was sized for, and how an update changes it.

Per pod set: how many pods run at once, what each container asks for (requests and limits as
the user wrote them, so a rewrite of the same value is a change a user made), and the topology
request. The validating webhook refuses a change while the job is admitted and, while it
waits, warns that its Workload is resized (docs/design/webhooks.md, "Job shape").
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from queuectl.api import gpushare, names
from queuectl.api.views import ObjectView
from queuectl.jobs.kind import JobKind, PodSet


@dataclass(frozen=True)
class PodSetShape:
    name: str
    count: int
    count_from: str
    resources: Any
    topology: tuple[str | None, ...]


def _shape(ps: PodSet) -> PodSetShape:
    template = gpushare.original(ps.template)  # a MIG slice placement renamed back
    pod = ObjectView(template).spec
    annotations = ObjectView(template).annotations
    resources = (
        [(c.get("name"), c.get("resources")) for c in pod.get("containers") or ()],
        [
            (c.get("name"), c.get("resources"), c.get("restartPolicy"))
            for c in pod.get("initContainers") or ()
        ],
        pod.get("overhead"),
    )
    topology = tuple(annotations.get(key) for key in names.PODSET_TOPOLOGY_ANNOTATIONS)
    return PodSetShape(ps.name, ps.count, ps.count_from, resources, topology)


def shape(kind: JobKind, job: Mapping[str, Any] | None) -> tuple[PodSetShape, ...]:
    """The job's shape, pod set by pod set (an absent job reads as an empty one)."""
    return tuple(_shape(ps) for ps in kind.pod_sets(dict(job or {})))


def shape_changes(
    kind: JobKind, old: Mapping[str, Any] | None, new: Mapping[str, Any] | None
) -> list[str]:
    """What an update changes of the job's shape, in words; empty when the shape is the same."""
    before, after = shape(kind, old), shape(kind, new)
    if [s.name for s in before] != [s.name for s in after]:
        return [
            f"its pod sets from [{', '.join(s.name for s in before)}] to "
            f"[{', '.join(s.name for s in after)}]"
        ]
    changes = []
    for was, now in zip(before, after, strict=True):
        where = f"pod set {now.name!r}: " if len(after) > 1 else ""
        if was.count != now.count:
            changes.append(
                f"{where}the pods it runs at once ({now.count_from}) from {was.count} to "
                f"{now.count}"
            )
        if was.resources != now.resources:
            changes.append(f"{where}the resources its pod template requests")
        if was.topology != now.topology:
            changes.append(f"{where}its pod template's topology request")
    return changes
