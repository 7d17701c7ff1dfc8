"""API objects (as the API server sends them) -> the core's plain inputs, and admissions back.

Pure: no I/O, no clock. The watch hands us JSON dicts that the API server has already validated
against the CRD schemas, so we read them directly rather than building a pydantic model for each
of tens of thousands of Workloads; quantities go through `queuectl.api.quantity.canonical`, the
same parser the API models use, so both sides agree on every unit. It sits below the shells
(controller, cli, sim) so that all of them read manifests the same way.

Callers use `queuectl.convert.<name>`; the functions live by what they convert: `units`
(quantities, times), `cluster` (flavors, topologies, cohorts, queues, nodes), `workloads`
(Workloads, pod sets, pod requests), `admissions` (an admission <-> status).
"""

from __future__ import annotations

from queuectl.convert.admissions import admission_from_status, admission_to_status
from queuectl.convert.cluster import (
    cluster_queue,
    cohort,
    flavor,
    gpu_time_bank,
    gpu_time_bank_balance,
    node,
    resource_groups,
    taint,
    toleration,
    topology,
)
from queuectl.convert.units import Obj, canonical, format_time, parse_time, quantity_string
from queuectl.convert.workloads import MAX_SHARED_PODSETS, pod_requests, podset, workload

__all__ = [
    "MAX_SHARED_PODSETS",
    "Obj",
    "admission_from_status",
    "admission_to_status",
    "canonical",
    "cluster_queue",
    "cohort",
    "flavor",
    "format_time",
    "gpu_time_bank",
    "gpu_time_bank_balance",
    "node",
    "parse_time",
    "pod_requests",
    "podset",
    "quantity_string",
    "resource_groups",
    "taint",
    "toleration",
    "topology",
    "workload",
]
