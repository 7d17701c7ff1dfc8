"""Cohorts and ClusterQueues: quota in resource groups, and the rules a ClusterQueue sets.

Kueue's resource groups are queuectl's field for field (DESIGN.md §2 follows Kueue v1beta2), so
they are copied key by key; what differs is a ClusterQueue's cohort field (`cohort` in v1beta1,
`cohortName` in v1beta2), the v1beta1 spellings of flavor fungibility, admission checks per
flavor, and the Kueue features queuectl does not have (admission fair sharing, concurrent
admission, per-queue resource exclusion), each reported.
"""

from __future__ import annotations

from typing import Any, Final

from queuectl.kueue.fields import Fields, items, present, quantity
from queuectl.kueue.report import Action

NATIVE_RESOURCES: Final = frozenset({"cpu", "memory", "ephemeral-storage"})
FUNGIBILITY_RENAMED: Final = {"Borrow": "MayStopSearch", "Preempt": "MayStopSearch"}
"""Kueue v1beta1's deprecated spellings and the v1beta2 names queuectl uses."""


def resource_groups(spec: Fields) -> list[dict[str, Any]]:
    """spec.resourceGroups, copied key by key (unknown keys reported)."""
    path = spec.at("resourceGroups")
    doc = spec.doc
    out: list[dict[str, Any]] = []
    for i, group in enumerate(items(spec.take("resourceGroups"), path, doc)):
        g = Fields(group, f"{path}[{i}]", doc)
        flavors: list[dict[str, Any]] = []
        for j, flavor in enumerate(items(g.take("flavors"), g.at("flavors"), doc)):
            f = Fields(flavor, f"{g.at('flavors')}[{j}]", doc)
            resources = [
                _resource_quota(Fields(r, f"{f.at('resources')}[{k}]", doc))
                for k, r in enumerate(items(f.take("resources"), f.at("resources"), doc))
            ]
            flavors.append(present({"name": f.take("name"), "resources": resources}))
            f.finish()
        covered = g.take("coveredResources")
        for name in covered if isinstance(covered, list) else []:
            if (why := _uncounted(str(name))) is not None:
                doc.note(f"{g.at('coveredResources')}.{name}", Action.KEPT, why)
        out.append(present({"coveredResources": covered, "flavors": flavors}))
        g.finish()
    return out


def _uncounted(resource: str) -> str | None:
    """Why quota of this resource limits nothing in queuectl (None: it counts)."""
    if resource == "pods":
        return (
            "Kueue counts each pod against a pods quota; queuectl counts what containers "
            "request, and no container requests pods, so this quota limits nothing"
        )
    if "/" in resource or resource in NATIVE_RESOURCES or resource.startswith("hugepages-"):
        return None
    return (
        f"no container requests {resource} (Kueue makes such resources from others with its "
        "Configuration's resource transformations, which queuectl does not have), so this "
        "quota limits nothing"
    )


def _resource_quota(r: Fields) -> dict[str, Any]:
    out = {
        "name": r.take("name"),
        "nominalQuota": quantity(r.take("nominalQuota")),
        "borrowingLimit": quantity(r.take("borrowingLimit")),
        "lendingLimit": quantity(r.take("lendingLimit")),
    }
    r.finish()
    return present(out)


def fair_sharing(spec: Fields) -> dict[str, Any] | None:
    if not spec.has("fairSharing"):
        return None
    fs = spec.sub("fairSharing")
    weight = fs.take("weight")
    fs.finish()
    if weight is None:
        return {}
    spec.doc.note(
        fs.at("weight"),
        Action.KEPT,
        "Kueue counts the weight only when fair sharing is enabled in its Configuration; "
        "queuectl always orders borrowing and reclaim by weighted share",
    )
    return {"weight": quantity(weight)}


def cohort(body: Fields) -> dict[str, Any]:
    """A Cohort's spec: the parent (`parent` before v1beta2, `parentName` since), own quota
    and fair-sharing weight."""
    spec = body.sub("spec")
    parent_key = "parentName" if spec.doc.version == "v1beta2" else "parent"
    out = present(
        {
            "parentName": spec.take(parent_key) or None,
            "resourceGroups": resource_groups(spec) or None,
            "fairSharing": fair_sharing(spec),
        }
    )
    spec.finish()
    return {"spec": out}


def cluster_queue(body: Fields) -> dict[str, Any]:
    """A ClusterQueue's spec."""
    spec = body.sub("spec")
    doc = spec.doc
    cohort_key = "cohort" if doc.version == "v1beta1" else "cohortName"
    checks = _admission_checks(spec)
    out: dict[str, Any] = {
        "cohortName": spec.take(cohort_key) or None,
        "namespaceSelector": spec.take("namespaceSelector"),
        "queueingStrategy": spec.take("queueingStrategy"),
        "resourceGroups": resource_groups(spec) or None,
        "preemption": _preemption(spec),
        "flavorFungibility": _fungibility(spec),
        "fairSharing": fair_sharing(spec),
        "stopPolicy": spec.take("stopPolicy"),
        "admissionChecks": checks or None,
    }
    if out["namespaceSelector"] is None:
        doc.note(
            "spec.namespaceSelector",
            Action.KEPT,
            "unset selects no namespace, as in Kueue; but where Kueue accepts a LocalQueue "
            "pointing at this queue and admits nothing from it, queuectl refuses to create "
            "such a LocalQueue: set {} (every namespace) or a selector to use it",
        )
    spec.drop(
        "admissionScope",
        "queuectl has no admission fair sharing: the workloads of a ClusterQueue's LocalQueues "
        "are ordered by priority, then age, whatever each LocalQueue used before",
    )
    spec.drop(
        "excludeResourcePrefixes",
        "queuectl has no per-queue exclusion of resources: a resource a workload requests is "
        "counted when the ClusterQueue covers it",
    )
    spec.drop(
        "concurrentAdmissionPolicy",
        "queuectl admits a workload in one flavor at a time and does not migrate it to a "
        "preferred flavor later",
    )
    spec.finish()
    return {"spec": present(out)}


def _preemption(spec: Fields) -> dict[str, Any] | None:
    if not spec.has("preemption"):
        return None
    p = spec.sub("preemption")
    borrow: dict[str, Any] | None = None
    if p.has("borrowWithinCohort"):
        b = p.sub("borrowWithinCohort")
        borrow = present(
            {"policy": b.take("policy"), "maxPriorityThreshold": b.take("maxPriorityThreshold")}
        )
        b.finish()
        if borrow.get("policy", "Never") != "Never":
            spec.doc.note(
                p.at("borrowWithinCohort"),
                Action.KEPT,
                "Kueue applies it only under classic preemption (not with fair sharing "
                "enabled); queuectl always applies it, next to fair-sharing weights",
            )
    out = present(
        {
            "withinClusterQueue": p.take("withinClusterQueue"),
            "reclaimWithinCohort": p.take("reclaimWithinCohort"),
            "borrowWithinCohort": borrow,
        }
    )
    p.finish()
    return out


def _fungibility(spec: Fields) -> dict[str, Any] | None:
    if not spec.has("flavorFungibility"):
        return None
    f = spec.sub("flavorFungibility")
    out: dict[str, Any] = {}
    for key in ("whenCanBorrow", "whenCanPreempt"):
        value = f.take(key)
        if value in FUNGIBILITY_RENAMED:
            new = FUNGIBILITY_RENAMED[value]
            spec.doc.note(
                f.at(key),
                Action.CHANGED,
                f"{value} is Kueue v1beta1's deprecated name of {new}; same meaning",
            )
            value = new
        if value is not None:
            out[key] = value
    f.drop(
        "preference",
        "queuectl has no preference setting: when every flavor needs borrowing or preemption "
        "it takes the first flavor that fits by borrowing, else the first that fits by "
        "preempting (Kueue's BorrowingOverPreemption)",
    )
    f.finish()
    return out


def _admission_checks(spec: Fields) -> list[str]:
    """spec.admissionChecks and spec.admissionChecksStrategy, as one list of names."""
    doc = spec.doc
    names = [n for n in items(spec.take("admissionChecks"), spec.at("admissionChecks"), doc)]
    if spec.has("admissionChecksStrategy"):
        strategy = spec.sub("admissionChecksStrategy")
        path = strategy.at("admissionChecks")
        for i, rule in enumerate(items(strategy.take("admissionChecks"), path, doc)):
            r = Fields(rule, f"{path}[{i}]", doc)
            name = r.take("name")
            flavors = r.take("onFlavors")
            if flavors:
                doc.note(
                    r.at("onFlavors"),
                    Action.CHANGED,
                    f"queuectl runs a ClusterQueue's checks for every workload that reserves "
                    f"quota in it, whatever the flavor: {name} now also gates workloads "
                    f"assigned other flavors than {', '.join(map(str, flavors))}",
                )
            r.finish()
            names.append(name)
        strategy.finish()
    return list(dict.fromkeys(names))
