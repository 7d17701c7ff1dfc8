"""What every kind's Workload is made of: its name, and its spec from the job's labels and pod
sets. The queuectl labels mean the same on every kind (DESIGN.md §4), so this lives once."""

from __future__ import annotations

import copy
import hashlib
from collections.abc import Mapping, Sequence
from typing import Any, Final

from queuectl.api import gpushare, names
from queuectl.api.views import ObjectView
from queuectl.jobs.kind import JsonPatch, PodSet
from queuectl.jobs.podtemplate import topology_request

_MAX_LABEL_VALUE: Final = 63


def workload_name_for(prefix: str, name: str, uid: str) -> str:
    """`<prefix>-<name>-<hash>`, cut to a label value: the hash of the uid keeps a recreated
    job with the same name from ever meeting its predecessor's Workload. Each kind passes its
    own prefix (`job`, `jobset` ...), so two kinds' jobs of one name never share a Workload."""
    digest = hashlib.sha256(f"{prefix}/{name}/{uid}".encode()).hexdigest()[:8]
    head = f"{prefix}-{name}"[: _MAX_LABEL_VALUE - len(digest) - 1].rstrip("-.")
    return f"{head}-{digest}"


def queue_name(job: Mapping[str, Any]) -> str | None:
    """The queue label's value; None when it is absent or empty."""
    value = ObjectView(job).labels.get(names.LABEL_QUEUE_NAME)
    return str(value) if value else None


def workload_spec(job: Mapping[str, Any], pod_sets: Sequence[PodSet]) -> dict[str, Any]:
    """The Workload spec a job with these pod sets asks for: each pod set's count and template
    (copied, so the Workload keeps the original), its topology request from the template's
    annotations, and the queue, priority class and time limit from the job's labels."""
    out_sets = []
    for ps in pod_sets:
        template = copy.deepcopy(gpushare.original(ps.template))  # as the user wrote it
        entry: dict[str, Any] = {"name": ps.name, "count": ps.count, "template": template}
        if topo := topology_request(template):
            entry["topologyRequest"] = topo
        out_sets.append(entry)
    found = ObjectView(job).labels
    out: dict[str, Any] = {"podSets": out_sets, "queueName": queue_name(job) or ""}
    if found.get(names.LABEL_PRIORITY_CLASS):
        out["priorityClassName"] = found[names.LABEL_PRIORITY_CLASS]
    max_exec = found.get(names.LABEL_MAX_EXEC_TIME, "")
    if max_exec.isdigit():
        out["maximumExecutionTimeSeconds"] = int(max_exec)
    return out


def suspend_ops_at(job: Mapping[str, Any], field: str) -> JsonPatch:
    """JSON patch ops setting the boolean `spec.<field>` to true, creating spec if missing;
    empty when it is already true. For kinds whose suspend flag sits directly under spec."""
    spec = job.get("spec")
    if isinstance(spec, dict) and spec.get(field):
        return []
    if not isinstance(spec, dict):
        return [{"op": "add", "path": "/spec", "value": {field: True}}]
    return [{"op": "add", "path": f"/spec/{field}", "value": True}]
