"""The one Protocol every job kind implements, and the placement it is asked to inject.

The controller's reconcile logic speaks only this interface, so a second kind (JobSet, a
PyTorchJob ...) is one more small module, never a change to the loop.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from queuectl.controller.kube import Obj, Resource


@dataclass(frozen=True)
class PodSetPlacement:
    """What admission decided for one pod set, in the shape a pod template needs."""

    name: str
    node_labels: Mapping[str, str] = field(default_factory=dict)
    """The chosen flavors' nodeLabels: required node affinity `key In [value]`."""
    tolerations: tuple[Mapping[str, Any], ...] = ()
    """The chosen flavors' tolerations, as core/v1 Toleration dicts."""
    domain: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    """Topology: node label -> the values allowed (the chosen domain, or the nodes used)."""
    gpu_resource: str | None = None
    """The device that serves nvidia.com/gpu in the chosen flavor (a MIG slice): the containers
    ask for it instead (docs/design/gpu-sharing.md)."""


@dataclass(frozen=True)
class Finished:
    succeeded: bool
    reason: str
    message: str


class JobAdapter(Protocol):
    """A job kind seen by the controller: how to read it, and how to start and stop it."""

    resource: Resource

    def queue_name(self, job: Obj) -> str | None:
        """The LocalQueue the job asks for (its queue label), None when it is not queued."""
        ...

    def workload_name(self, job: Obj) -> str:
        """A deterministic, label-safe name for the job's Workload."""
        ...

    def workload_spec(self, job: Obj) -> dict[str, Any]:
        """podSets, queueName, priorityClassName (not yet the numeric priority),
        maximumExecutionTimeSeconds: the Workload spec this job asks for."""
        ...

    def pod_priority_class(self, job: Obj) -> str | None:
        """The pod template's priorityClassName, the fallback source of priority."""
        ...

    def is_suspended(self, job: Obj) -> bool: ...

    def finished(self, job: Obj) -> Finished | None:
        """Set when the job has reached a terminal state."""
        ...

    def pods_gone(self, job: Obj) -> bool:
        """No pod of the job is running or terminating: its quota can be released."""
        ...

    def can_restore(self, job: Obj) -> bool:
        """Whether the pod template may be changed now (suspended and not started)."""
        ...

    def run_patch(
        self, job: Obj, pod_sets: Sequence[Obj], placements: Sequence[PodSetPlacement]
    ) -> dict[str, Any]:
        """A merge patch that injects the placements (over the Workload's original pod
        templates, so injecting twice never stacks) and unsuspends."""
        ...

    def suspend_patch(self, job: Obj) -> dict[str, Any]: ...

    def restore_patch(self, job: Obj, pod_sets: Sequence[Obj]) -> dict[str, Any] | None:
        """A merge patch that removes what run_patch injected; None if nothing to remove."""
        ...
