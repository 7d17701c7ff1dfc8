"""Admission decisions for queuectl's own resources: the checks CEL in the CRDs cannot make.

CEL sees one object; these need either a view across list items that CEL expresses badly
(a resource or flavor repeated across resource groups) or other objects (the namespace a
LocalQueue lives in, the parents of existing cohorts).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from queuectl.api import names
from queuectl.api.selectors import namespace_labels, namespace_selected
from queuectl.api.views import ObjectView
from queuectl.webhooks.lookup import QueueLookup
from queuectl.webhooks.review import Request, Response, allow, deny


def validate_queuectl(request: Request, lookup: QueueLookup) -> Response:
    """Dispatch on the kind of a queuectl.io object; kinds without extra rules are allowed."""
    kind = request.get("kind") or {}
    obj = request.get("object")
    if kind.get("group") != names.GROUP or not isinstance(obj, dict):
        return allow(request)
    if request.get("operation") not in ("CREATE", "UPDATE"):
        return allow(request)
    name = str(ObjectView(obj).meta.get("name") or request.get("name") or "")
    spec = ObjectView(obj).spec
    warnings: list[str] = []
    if kind.get("kind") == "ClusterQueue":
        problems = resource_group_problems(spec, "cohortName")
        ref = f"ClusterQueue {name}"
    elif kind.get("kind") == "Cohort":
        problems = resource_group_problems(spec, "parentName") + cohort_cycle_problems(
            name, spec.get("parentName"), lookup
        )
        ref = f"Cohort {name}"
    elif kind.get("kind") == "LocalQueue":
        problems, warnings = local_queue_problems(request, obj, lookup)
        ref = f"LocalQueue {request.get('namespace', '')}/{name}"
    else:
        return allow(request)
    if problems:
        return deny(request, f"{ref}: " + "; ".join(problems), code=422, warnings=warnings)
    return allow(request, warnings=warnings)


def resource_group_problems(spec: Mapping[str, Any], parent_field: str) -> list[str]:
    """Repeats across resource groups, flavors out of step with coveredResources, limits
    without a parent to borrow from or lend to."""
    problems: list[str] = []
    resource_home: dict[str, int] = {}
    flavor_home: dict[str, int] = {}
    has_parent = bool(spec.get(parent_field))
    for index, group in enumerate(spec.get("resourceGroups") or []):
        covered = [str(r) for r in group.get("coveredResources") or []]
        for resource in covered:
            if resource in resource_home:
                problems.append(
                    f"resource {resource!r} is covered by resourceGroups"
                    f"[{resource_home[resource]}] and resourceGroups[{index}]; list each "
                    "resource in one group only"
                )
            else:
                resource_home[resource] = index
        for flavor in group.get("flavors") or []:
            flavor_name = str(flavor.get("name", ""))
            if flavor_name in flavor_home:
                first = flavor_home[flavor_name]
                where = (
                    f"twice in resourceGroups[{index}]"
                    if first == index
                    else f"in resourceGroups[{first}] and resourceGroups[{index}]"
                )
                problems.append(
                    f"flavor {flavor_name!r} appears {where}; a flavor belongs to one group, "
                    "so merge its resources into that group"
                )
            else:
                flavor_home[flavor_name] = index
            problems += _flavor_problems(
                index, flavor_name, flavor, covered, has_parent, parent_field
            )
    return problems


def _flavor_problems(
    index: int,
    flavor_name: str,
    flavor: Mapping[str, Any],
    covered: Sequence[str],
    has_parent: bool,
    parent_field: str,
) -> list[str]:
    problems = []
    resources = flavor.get("resources") or []
    listed = [str(r.get("name", "")) for r in resources]
    if listed != list(covered):
        problems.append(
            f"flavor {flavor_name!r} in resourceGroups[{index}] lists resources {listed}, but "
            f"the group covers {list(covered)}; give one entry per covered resource, in the "
            "same order"
        )
    if not has_parent:
        for resource in resources:
            limits = [k for k in ("borrowingLimit", "lendingLimit") if resource.get(k) is not None]
            if limits:
                problems.append(
                    f"{' and '.join(limits)} of {flavor_name!r}/{resource.get('name')} need "
                    f"spec.{parent_field}: without a cohort there is nothing to borrow from or "
                    "lend to; set the cohort or remove the limit"
                )
    return problems


def cohort_cycle_problems(name: str, parent: str | None, lookup: QueueLookup) -> list[str]:
    """A cohort's parent chain must end; walking it through the cache must not meet `name`."""
    path = [name]
    current = parent
    while current:
        if current in path:
            cycle = " -> ".join([*path[path.index(current) :], current])
            if current == name:
                return [
                    f"spec.parentName {parent!r} makes a cycle ({cycle}); cohorts form a tree, "
                    "so choose a parent that is not this cohort or one of its descendants"
                ]
            return [
                f"the parent chain of {parent!r} already loops ({cycle}); fix those cohorts' "
                "parentName first"
            ]
        path.append(current)
        current = lookup.cohort_parent(current)
    return []


def local_queue_problems(
    request: Request, obj: Mapping[str, Any], lookup: QueueLookup
) -> tuple[list[str], list[str]]:
    """clusterQueue is immutable, and its ClusterQueue must select the LocalQueue's namespace."""
    namespace = str(request.get("namespace") or ObjectView(obj).namespace)
    cq_name = ObjectView(obj).spec.get("clusterQueue")
    old = request.get("oldObject")
    if old is not None:
        old_cq = ObjectView(old).spec.get("clusterQueue")
        if old_cq != cq_name:
            return [
                f"spec.clusterQueue is immutable (was {old_cq!r}); delete the LocalQueue and "
                "create it again to point it elsewhere"
            ], []
    if not cq_name:
        return [], []  # the schema requires it; nothing more to say here
    exists, selector = lookup.cluster_queue_selector(str(cq_name))
    if not exists:
        return [], [
            f"ClusterQueue {cq_name!r} does not exist yet; this LocalQueue stays inactive until "
            f"it exists and its namespaceSelector selects namespace {namespace!r}"
        ]
    seen = lookup.namespace_labels(namespace)
    if namespace_selected(selector, namespace, seen):
        return [], []
    labels = namespace_labels(namespace, seen)
    if selector is None:
        why = "its spec.namespaceSelector is unset, which selects no namespace"
        fix = "set it to {} (every namespace) or to a selector that matches this namespace"
    else:
        why = (
            f"its spec.namespaceSelector {json.dumps(selector, sort_keys=True)} "
            f"does not match the namespace's labels {json.dumps(labels, sort_keys=True)}"
        )
        if seen is None:
            why += (
                " (the namespace is not in the webhook's cache yet, so only its name label is "
                "known; if it was just created, try again in a moment)"
            )
        fix = (
            f"label the namespace to match (`kubectl label namespace {namespace} KEY=VALUE`), "
            "widen the selector, or use a ClusterQueue meant for this namespace"
        )
    return [
        f"ClusterQueue {cq_name!r} does not accept work from namespace {namespace!r}: {why}; {fix}"
    ], []
