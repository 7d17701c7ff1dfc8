"""Cluster-scoped configuration -> the core's specs: ResourceFlavors, Topologies, Cohorts,
ClusterQueues and Nodes."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from queuectl.api import names, quantity
from queuectl.api.views import ObjectView
from queuectl.convert.units import Obj, canonical
from queuectl.core import types as core


def taint(t: Obj) -> core.Taint:
    return core.Taint(
        key=t["key"], value=t.get("value") or "", effect=t.get("effect", "NoSchedule")
    )


def toleration(t: Obj) -> core.Toleration:
    return core.Toleration(
        key=t.get("key") or "",
        operator=t.get("operator") or "Equal",
        value=t.get("value") or "",
        effect=t.get("effect") or "",
    )


def flavor(obj: Obj) -> core.Flavor:
    view = ObjectView(obj)
    spec = view.spec
    return core.Flavor(
        name=view.meta["name"],
        node_labels=dict(spec.get("nodeLabels") or {}),
        node_taints=tuple(taint(t) for t in spec.get("nodeTaints") or ()),
        tolerations=tuple(toleration(t) for t in spec.get("tolerations") or ()),
        topology_name=spec.get("topologyName"),
        node_resources={core.GPU: spec["gpuResource"]} if spec.get("gpuResource") else {},
    )


def topology(obj: Obj) -> core.Topology:
    view = ObjectView(obj)
    levels = view.spec.get("levels") or ()
    return core.Topology(name=view.meta["name"], levels=tuple(lv["nodeLabel"] for lv in levels))


def _optional_quantity(resource: str, value: Any) -> int | None:
    return None if value is None else canonical(resource, value)


def resource_groups(groups: Iterable[Obj]) -> tuple[core.ResourceGroup, ...]:
    out = []
    for group in groups:
        flavors = []
        for fq in group.get("flavors") or ():
            resources = tuple(
                core.ResourceQuota(
                    name=r["name"],
                    nominal=canonical(r["name"], r.get("nominalQuota", 0)),
                    borrowing_limit=_optional_quantity(r["name"], r.get("borrowingLimit")),
                    lending_limit=_optional_quantity(r["name"], r.get("lendingLimit")),
                )
                for r in fq.get("resources") or ()
            )
            flavors.append(core.FlavorQuotas(name=fq["name"], resources=resources))
        out.append(
            core.ResourceGroup(
                covered_resources=tuple(group.get("coveredResources") or ()),
                flavors=tuple(flavors),
            )
        )
    return tuple(out)


def _weight(spec: Obj) -> float:
    weight = (spec.get("fairSharing") or {}).get("weight")
    return 1.0 if weight is None else float(quantity.to_decimal(weight))


def cohort(obj: Obj) -> core.Cohort:
    view = ObjectView(obj)
    spec = view.spec
    return core.Cohort(
        name=view.meta["name"],
        parent=spec.get("parentName") or None,
        resource_groups=resource_groups(spec.get("resourceGroups") or ()),
        fair_weight=_weight(spec),
    )


def cluster_queue(obj: Obj) -> core.ClusterQueue:
    view = ObjectView(obj)
    spec = view.spec
    pre = spec.get("preemption") or {}
    bwc = pre.get("borrowWithinCohort") or {}
    fung = spec.get("flavorFungibility") or {}
    return core.ClusterQueue(
        name=view.meta["name"],
        cohort=spec.get("cohortName") or None,
        resource_groups=resource_groups(spec.get("resourceGroups") or ()),
        queueing_strategy=spec.get("queueingStrategy") or "BestEffortFIFO",
        preemption=core.PreemptionPolicy(
            within_cluster_queue=pre.get("withinClusterQueue") or "Never",
            reclaim_within_cohort=pre.get("reclaimWithinCohort") or "Never",
            borrow_within_cohort=core.BorrowWithinCohort(
                policy=bwc.get("policy") or "Never",
                max_priority_threshold=bwc.get("maxPriorityThreshold"),
            ),
        ),
        flavor_fungibility=core.FlavorFungibility(
            when_can_borrow=fung.get("whenCanBorrow") or "Borrow",
            when_can_preempt=fung.get("whenCanPreempt") or "TryNextFlavor",
        ),
        fair_weight=_weight(spec),
        stop_policy=spec.get("stopPolicy") or "None",
        admission_checks=tuple(spec.get("admissionChecks") or ()),
        gpu_time_bank=gpu_time_bank(spec.get("gpuTimeBank")),
        block_admission=_block_admission(spec),
    )


def _block_admission(spec: Obj) -> bool | None:
    """spec.waitForPodsReady.blockAdmission; None: the controller's flag decides."""
    value = (spec.get("waitForPodsReady") or {}).get("blockAdmission")
    return value if isinstance(value, bool) else None


def gpu_time_bank(bank: Obj | None) -> core.GpuTimeBank | None:
    """spec.gpuTimeBank (off when absent; the CRD schema refuses bad numbers)."""
    if not bank:
        return None
    half = bank.get("halfLifeHours")
    return core.GpuTimeBank(
        cap_gpu_hours=float(bank.get("capGPUHours", 0.0)),
        accrual_rate=float(bank.get("accrualRate", 1.0)),
        half_life_hours=None if half is None else float(half),
    )


def gpu_time_bank_balance(obj: Obj) -> float | None:
    """status.gpuTimeBank.balanceGPUHours: what a restarted controller starts from."""
    bank = ObjectView(obj).status.get("gpuTimeBank") or {}
    value = bank.get("balanceGPUHours")
    return None if value is None else float(value)


_GPU_DOUBT = (names.TAINT_GPU_UNHEALTHY, names.TAINT_GPU_UNKNOWN)


def node(obj: Obj) -> core.Node:
    view = ObjectView(obj)
    meta, spec = view.meta, view.spec
    labels = dict(view.labels)
    allocatable = {}
    for res, value in (view.status.get("allocatable") or {}).items():
        try:
            allocatable[res] = canonical(res, value)
        except quantity.QuantityError:
            continue  # e.g. fractional extended resources we do not schedule
    healthy = labels.get(names.LABEL_GPU_HEALTHY_COUNT)
    ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in view.conditions)
    # A node whose agent reports a bad GPU offers nothing new, even to pods that would
    # tolerate the taint: its healthy GPUs may share a board, a switch or a fate with the bad one.
    # Nor does one whose agent went silent (the controller's `unknown` taint): nobody vouches
    # for its GPUs.
    gpu_unhealthy = any(
        t.get("key") in _GPU_DOUBT and t.get("effect") in ("NoSchedule", "NoExecute")
        for t in spec.get("taints") or ()
    )
    return core.Node(
        name=meta["name"],
        labels=labels,
        allocatable=allocatable,
        unschedulable=bool(spec.get("unschedulable")) or not ready or gpu_unhealthy,
        healthy_gpus=int(healthy) if healthy and healthy.isdigit() else None,
        taints=tuple(
            taint(t) for t in spec.get("taints") or () if t.get("effect") != "PreferNoSchedule"
        ),
    )
