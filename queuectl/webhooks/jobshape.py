"""The shape of a batch/v1 Job: what its Workload's quota was sized for.

A queued Job's Workload copies, at creation, how many pods run at once and what each asks for.
A change to any of these while the Workload holds quota would let more run than was admitted,
so the validating webhook refuses it then; while the Job waits, the controller resizes its
Workload instead (docs/design/webhooks.md, "Job shape").
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from queuectl.api import gpushare, names

_TOPOLOGY_ANNOTATIONS = (
    names.ANNOTATION_PODSET_REQUIRED_TOPOLOGY,
    names.ANNOTATION_PODSET_PREFERRED_TOPOLOGY,
)


def pods_at_once(job: Mapping[str, Any] | None) -> int:
    """Pods running at once: parallelism (default 1), never more than completions."""
    spec = (job or {}).get("spec") or {}
    parallelism, completions = spec.get("parallelism"), spec.get("completions")
    count = 1 if parallelism is None else int(parallelism)
    return count if completions is None else min(count, int(completions))


def _template(job: Mapping[str, Any] | None) -> Mapping[str, Any]:
    """The pod template as the user wrote it (a MIG slice placement renamed back)."""
    return gpushare.original(((job or {}).get("spec") or {}).get("template") or {})


def _resources(job: Mapping[str, Any] | None) -> Any:
    """Every container's requests and limits, and the pod overhead, as the user wrote them."""
    pod = _template(job).get("spec") or {}
    return (
        [(c.get("name"), c.get("resources")) for c in pod.get("containers") or ()],
        [
            (c.get("name"), c.get("resources"), c.get("restartPolicy"))
            for c in pod.get("initContainers") or ()
        ],
        pod.get("overhead"),
    )


def _topology(job: Mapping[str, Any] | None) -> tuple[str | None, ...]:
    annotations = (_template(job).get("metadata") or {}).get("annotations") or {}
    return tuple(annotations.get(key) for key in _TOPOLOGY_ANNOTATIONS)


def shape_changes(old: Mapping[str, Any] | None, new: Mapping[str, Any] | None) -> list[str]:
    """What an update changes of the Job's shape, in words; empty when the shape is the same."""
    changes = []
    if pods_at_once(old) != pods_at_once(new):
        changes.append(
            f"the pods it runs at once (parallelism, at most completions) from "
            f"{pods_at_once(old)} to {pods_at_once(new)}"
        )
    if _resources(old) != _resources(new):
        changes.append("the resources its pod template requests")
    if _topology(old) != _topology(new):
        changes.append("its pod template's topology request")
    return changes
