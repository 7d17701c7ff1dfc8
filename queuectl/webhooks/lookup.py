"""The narrow view of cluster state the admission decisions need.

The controller implements `QueueLookup` from its informer cache; tests use `InMemoryLookup`.
Every question is answered from memory and must not block. The exceptions are `read_input`
and `read_owner`, awaited before a decision (never inside one): a runtime applied together with
its TrainJob, or the JobSet whose operator creates its Jobs a moment after it, may not have
reached the cache through the watch yet; refusing the job for the first, or taking the child
for an object nobody owns for the second, would be wrong.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from queuectl.api.resource import Obj, Resource
from queuectl.jobs.batch import JOBS


class QueueLookup(Protocol):
    """Read-only questions the webhooks ask of the controller's cache."""

    def local_queue(self, namespace: str, name: str) -> str | None:
        """The spec.clusterQueue of LocalQueue namespace/name, or None if there is no such queue."""
        ...

    def cluster_queue_selector(self, name: str) -> tuple[bool, Mapping[str, Any] | None]:
        """(whether ClusterQueue name exists, its spec.namespaceSelector).

        A None selector is unset and selects no namespace; {} selects every namespace.
        """
        ...

    def namespace_labels(self, namespace: str) -> Mapping[str, str] | None:
        """The labels of a namespace, or None if the namespace is unknown."""
        ...

    def is_job_admitted(self, namespace: str, job_name: str, resource: Resource = JOBS) -> bool:
        """Whether the Workload of this job (of kind `resource`) holds quota: QuotaReserved=True
        or Admitted=True, and it is not Evicted and not Finished."""
        ...

    def cohort_parent(self, name: str) -> str | None:
        """The spec.parentName of Cohort name; None if it has none or does not exist."""
        ...

    def priority_class_exists(self, name: str) -> bool:
        """Whether WorkloadPriorityClass name exists."""
        ...

    def priority_class_selector(self, name: str) -> Mapping[str, Any] | None:
        """The namespaceSelector of WorkloadPriorityClass name; None when it has none (every
        namespace may use it) or the class does not exist."""
        ...

    def input_object(self, resource: Resource, namespace: str, name: str) -> Obj | None:
        """An object of a resource the cache holds: one a job kind reads its pod sets from (a
        TrainJob's runtime; `ReadsInputs`), or a job of a registered kind (the verified owner
        of a child or pod, webhooks/owned.py). None when it does not exist or its resource is
        not held."""
        ...

    async def read_input(self, resource: Resource, namespace: str, name: str) -> None:
        """Make `input_object` see the object as the API server has it now (one read), also
        one the cache has not received yet. Best effort: a failure leaves the answer to the
        cache."""
        ...

    def owner_object(self, resource: Resource, namespace: str, name: str) -> Obj | None:
        """A job kind's object (the owner a child's ownerReference names), None when the
        cache has no such object."""
        ...

    async def read_owner(self, resource: Resource, namespace: str, name: str) -> None:
        """Make `owner_object` see the object as the API server has it now (one read), for
        an owner the cache lacks or holds under another uid. Best effort, like `read_input`."""
        ...


@dataclass
class InMemoryLookup:
    """A `QueueLookup` over plain dicts, for tests and `queuectl` dry runs."""

    local_queues: dict[tuple[str, str], str] = field(default_factory=dict)
    cluster_queues: dict[str, Mapping[str, Any] | None] = field(default_factory=dict)
    namespaces: dict[str, dict[str, str]] = field(default_factory=dict)
    admitted_jobs: set[tuple[str, str]] = field(default_factory=set)
    cohort_parents: dict[str, str | None] = field(default_factory=dict)
    priority_classes: set[str] = field(default_factory=set)
    priority_class_selectors: dict[str, Mapping[str, Any]] = field(default_factory=dict)
    inputs: dict[tuple[str, str, str], Obj] = field(default_factory=dict)
    """(plural, namespace or "", name) -> object."""
    owners: dict[tuple[str, str, str], Obj] = field(default_factory=dict)
    """(plural, namespace, name) -> a job kind's object, as the cache holds it."""
    api_server: dict[tuple[str, str, str], Obj] = field(default_factory=dict)
    """What `read_owner` and `read_input` find that the cache (`owners`, `inputs`) has not
    received yet."""

    def local_queue(self, namespace: str, name: str) -> str | None:
        return self.local_queues.get((namespace, name))

    def cluster_queue_selector(self, name: str) -> tuple[bool, Mapping[str, Any] | None]:
        return name in self.cluster_queues, self.cluster_queues.get(name)

    def namespace_labels(self, namespace: str) -> Mapping[str, str] | None:
        return self.namespaces.get(namespace)

    def is_job_admitted(self, namespace: str, job_name: str, resource: Resource = JOBS) -> bool:
        return (namespace, job_name) in self.admitted_jobs

    def cohort_parent(self, name: str) -> str | None:
        return self.cohort_parents.get(name)

    def priority_class_exists(self, name: str) -> bool:
        return name in self.priority_classes or name in self.priority_class_selectors

    def priority_class_selector(self, name: str) -> Mapping[str, Any] | None:
        return self.priority_class_selectors.get(name)

    def input_object(self, resource: Resource, namespace: str, name: str) -> Obj | None:
        return self.inputs.get((resource.plural, namespace, name))

    async def read_input(self, resource: Resource, namespace: str, name: str) -> None:
        key = (resource.plural, namespace, name)
        if key in self.api_server:
            self.inputs[key] = self.api_server[key]

    def owner_object(self, resource: Resource, namespace: str, name: str) -> Obj | None:
        return self.owners.get((resource.plural, namespace, name))

    async def read_owner(self, resource: Resource, namespace: str, name: str) -> None:
        key = (resource.plural, namespace, name)
        if key in self.api_server:
            self.owners[key] = self.api_server[key]
