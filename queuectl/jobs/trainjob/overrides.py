"""`spec.podTemplateOverrides`: how a placement reaches a TrainJob's pods, and how a user's own
overrides shape the templates its Workload records.

trainer merges each override into the runtime's pod template of every replicated job it targets,
in list order, with a strategic merge patch (later entries win). queuectl's entries are the
ones labelled `queuectl.io/workload` (one per pod set, last in the list): they carry that label,
the flavor's and the domain's nodeSelector and the tolerations. nodeSelector, not affinity: the
JobSet they reach is suspended, and JobSet's webhook lets only labels, annotations, nodeSelector,
tolerations and scheduling gates of a suspended JobSet change (docs/design/jobs.md, "JobSet").
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any

from queuectl.api import names
from queuectl.api.resource import Obj
from queuectl.api.views import ObjectView
from queuectl.jobs import podtemplate as pt
from queuectl.jobs.jobset.kind import node_selector
from queuectl.jobs.kind import PodSetPlacement

MERGED_MAPS = ("nodeSelector",)
"""Pod spec maps a strategic merge merges key by key."""
REPLACED = ("tolerations", "serviceAccountName")
"""Pod spec fields without a merge strategy: an override replaces them whole."""


def entries(job: Mapping[str, Any]) -> list[Obj]:
    return list(pt.at_path(job, ("spec", "podTemplateOverrides")) or [])


def is_ours(entry: Mapping[str, Any]) -> bool:
    return names.LABEL_WORKLOAD in (pt.at_path(entry, ("metadata", "labels")) or {})


def users(job: Mapping[str, Any]) -> list[Obj]:
    return [e for e in entries(job) if not is_ours(e)]


def ours(job: Mapping[str, Any]) -> list[Obj]:
    return [e for e in entries(job) if is_ours(e)]


def _targets(entry: Mapping[str, Any], name: str) -> bool:
    return any(t.get("name") == name for t in entry.get("targetJobs") or ())


def apply(template: Mapping[str, Any], overrides: Sequence[Mapping[str, Any]], name: str) -> Obj:
    """The pod template of replicated job `name` with the overrides that target it merged in,
    as far as quota and placement read it: labels and annotations, nodeSelector, affinity,
    tolerations, scheduling gates, service account (not env, volumes or image pull secrets)."""
    out: Obj = copy.deepcopy(dict(template))
    for entry in overrides:
        if not _targets(entry, name):
            continue
        meta = out.setdefault("metadata", {})
        for key in ("labels", "annotations"):
            if found := pt.at_path(entry, ("metadata", key)):
                meta[key] = {**(meta.get(key) or {}), **found}
        if not meta:
            del out["metadata"]
        spec = out.setdefault("spec", {})
        given = ObjectView(entry).spec
        for key in MERGED_MAPS:
            if given.get(key):
                spec[key] = {**(spec.get(key) or {}), **given[key]}
        for key in REPLACED:
            if given.get(key) is not None:
                spec[key] = copy.deepcopy(given[key])
        if given.get("affinity"):
            spec["affinity"] = pt.deep_merge(spec.get("affinity") or {}, given["affinity"])
        gates = list(spec.get("schedulingGates") or [])
        for gate in given.get("schedulingGates") or ():
            if gate.get("name") not in {g.get("name") for g in gates}:
                gates.append(dict(gate))
        if gates:
            spec["schedulingGates"] = gates
    return out


def placed(
    name: str, original: Mapping[str, Any], placement: PodSetPlacement, workload: str
) -> Obj:
    """queuectl's override for pod set `name`: the Workload label, the placement's nodeSelector
    and, when it adds any, every toleration (the recorded ones and the flavor's: an override's
    list replaces the template's). `original` is the pod spec the Workload recorded."""
    spec: Obj = {}
    if selector := node_selector(placement):
        spec["nodeSelector"] = selector
    if placement.tolerations:
        tolerations = [dict(t) for t in original.get("tolerations") or ()]
        tolerations += [dict(t) for t in placement.tolerations if dict(t) not in tolerations]
        spec["tolerations"] = tolerations
    entry: Obj = {
        "targetJobs": [{"name": name}],
        "metadata": {"labels": {names.LABEL_WORKLOAD: workload}},
    }
    if spec:
        entry["spec"] = spec
    return entry
