"""API objects (as the API server sends them) -> the core's plain inputs, and admissions back.

Pure: no I/O, no clock. The watch hands us JSON dicts that the API server has already validated
against the CRD schemas, so we read them directly rather than building a pydantic model for each
of tens of thousands of Workloads; quantities go through `queuectl.api.quantity.canonical`, the
same parser the API models use, so both sides agree on every unit. It sits below the shells
(controller, cli, sim) so that all of them read manifests the same way.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from functools import lru_cache
from typing import Any

from queuectl.api import names, quantity
from queuectl.api.views import ObjectView, WorkloadView
from queuectl.core import types as core

Obj = Mapping[str, Any]


@lru_cache(maxsize=4096)
def _canonical(resource: str, value: str | int) -> int:
    return quantity.canonical(resource, value)


def canonical(resource: str, value: Any) -> int:
    """A quantity in canonical units; memoised since the same spellings repeat everywhere."""
    return _canonical(resource, value if isinstance(value, int | str) else str(value))


def parse_time(value: str | None) -> float | None:
    """RFC3339 -> epoch seconds."""
    if not value:
        return None
    return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()


def format_time(epoch: float) -> str:
    """Epoch seconds -> RFC3339 (UTC, second precision, as metav1.Time writes it)."""
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


# --- cluster-scoped configuration ---------------------------------------------------------
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


# --- pods and workloads --------------------------------------------------------------------
def pod_requests(pod_spec: Obj) -> dict[str, int]:
    """What one pod reserves: the sum over containers, at least the largest init container
    (they run one at a time before the others), plus the pod overhead. Limits stand in for
    missing requests, as the API server defaults them."""

    def of(container: Obj) -> dict[str, int]:
        res = container.get("resources") or {}
        merged = {**(res.get("limits") or {}), **(res.get("requests") or {})}
        return {name: canonical(name, value) for name, value in merged.items()}

    total: dict[str, int] = {}
    for c in pod_spec.get("containers") or ():
        for name, value in of(c).items():
            total[name] = total.get(name, 0) + value
    sidecars: dict[str, int] = {}
    for c in pod_spec.get("initContainers") or ():
        req = of(c)
        if c.get("restartPolicy") == "Always":  # a sidecar runs alongside the containers
            for name, value in req.items():
                sidecars[name] = sidecars.get(name, 0) + value
            continue
        for name, value in req.items():
            total[name] = max(total.get(name, 0), value + sidecars.get(name, 0))
    for name, value in sidecars.items():
        total[name] = total.get(name, 0) + value
    for name, value in (pod_spec.get("overhead") or {}).items():
        total[name] = total.get(name, 0) + canonical(name, value)
    return {k: v for k, v in total.items() if v}


def _topology_request(podset: Obj) -> core.TopologyRequest | None:
    req = podset.get("topologyRequest") or {}
    slices = tuple(
        (str(c.get("topology")), int(c.get("size", 0)))
        for c in req.get("podSetSliceRequiredTopologyConstraints") or ()
    )
    balanced = bool(req.get("balancedPlacement"))
    if not req.get("required") and not req.get("preferred") and not slices and not balanced:
        return None
    return core.TopologyRequest(
        required=req.get("required"),
        preferred=req.get("preferred"),
        group=req.get("podSetGroupName"),
        slices=slices,
        balanced=balanced,
    )


def podset(ps: Obj) -> core.PodSet:
    """The core's PodSet; equal ones are one shared object (`_shared_podset`)."""
    pod_spec = (ps.get("template") or {}).get("spec") or {}
    return _shared_podset(
        core.PodSet(
            name=ps.get("name") or "main",
            count=int(ps.get("count", 1)),
            requests=pod_requests(pod_spec),
            topology=_topology_request(ps),
            node_selector=dict(pod_spec.get("nodeSelector") or {}),
            tolerations=tuple(toleration(t) for t in pod_spec.get("tolerations") or ()),
        )
    )


_PODSETS: dict[tuple[Any, ...], core.PodSet] = {}
MAX_SHARED_PODSETS = 4096


def _shared_podset(ps: core.PodSet) -> core.PodSet:
    """Thousands of pending Workloads have one of a few shapes; the core keeps each one's
    PodSets (a frozen record of two dicts), so equal ones are shared. Bounded: when full, the
    table starts over (what was shared stays shared)."""
    key = (
        ps.name,
        ps.count,
        tuple(sorted(ps.requests.items())),
        ps.topology,
        tuple(sorted(ps.node_selector.items())),
        ps.tolerations,
    )
    found = _PODSETS.get(key)
    if found is not None:
        return found
    if len(_PODSETS) >= MAX_SHARED_PODSETS:
        _PODSETS.clear()
    _PODSETS[key] = ps
    return ps


def workload(
    obj: Obj,
    cluster_queue_name: str,
    *,
    grace_seconds: float = 0.0,
    minimum_runtime_seconds: float = 0.0,
    priority: int | None = None,
) -> core.Workload:
    """The core's view of a Workload whose LocalQueue resolved to `cluster_queue_name`
    (`priority`: instead of spec.priority, when that was never resolved)."""
    view = WorkloadView(obj)
    spec, status = view.spec, view.status
    admission = admission_from_status(status["admission"]) if view.holds_quota else None
    admitted_at = None
    if admission is not None:
        cond = view.condition(names.COND_QUOTA_RESERVED)
        admitted_at = parse_time(cond.get("lastTransitionTime") if cond else None)
    max_exec = spec.get("maximumExecutionTimeSeconds")
    past = float(status.get("accumulatedPastExecutionTimeSeconds") or 0)
    if max_exec is not None and admission is not None:
        max_exec = _exec_budget(view, float(max_exec), admitted_at)
    requeue_at = parse_time((status.get("requeueState") or {}).get("requeueAt"))
    return core.Workload(
        key=view.key,
        cluster_queue=cluster_queue_name,
        podsets=tuple(podset(ps) for ps in view.pod_sets),
        priority=priority if priority is not None else int(spec.get("priority") or 0),
        created=parse_time(view.meta.get("creationTimestamp")) or 0.0,
        active=spec.get("active", True) is not False,
        admission=admission,
        admitted_at=admitted_at,
        preemption_grace_seconds=grace_seconds,
        minimum_runtime_seconds=minimum_runtime_seconds,
        max_execution_seconds=None if max_exec is None else max(0.0, float(max_exec) - past),
        not_before=requeue_at or 0.0,
        front=admission is None and view.requeued_for_node_failure,
        starting=admission is not None and not view.is_true(names.COND_PODS_READY),
    )


def _exec_budget(view: WorkloadView, max_exec: float, reserved_at: float | None) -> float | None:
    """The core times maximumExecutionTimeSeconds from the reservation; only admitted time
    counts, so a reservation still waiting for its checks has no deadline yet, and one admitted
    later gets the wait added."""
    cond = view.condition(names.COND_ADMITTED)
    if cond is None:
        return max_exec
    if cond.get("status") != "True":
        return None  # quota reserved, waiting for its admission checks
    since = parse_time(cond.get("lastTransitionTime"))
    if since is None or reserved_at is None:
        return max_exec
    return max_exec + max(0.0, since - reserved_at)


# --- admission <-> status ------------------------------------------------------------------
def admission_to_status(admission: core.Admission) -> dict[str, Any]:
    """core.Admission -> Workload status.admission (quantities as canonical integers)."""
    return {
        "clusterQueue": admission.cluster_queue,
        "podSetAssignments": [_assignment_to_status(a) for a in admission.podsets],
    }


def _assignment_to_status(a: core.PodSetAssignment) -> dict[str, Any]:
    out: dict[str, Any] = {
        "name": a.name,
        "count": a.count,
        "flavors": dict(a.flavors),
        "resourceUsage": {res: quantity_string(res, v) for res, v in a.usage.items()},
    }
    if a.topology is not None:
        # The CRD keeps levels and per-domain values and counts; the single domain and the
        # node names are derived back from them (see _topology_from_status).
        out["topologyAssignment"] = {
            "levels": list(a.topology.levels),
            "domains": [{"values": list(d.values), "count": d.count} for d in a.topology.domains],
        }
    return out


def quantity_string(resource: str, value: int) -> str | int:
    """Canonical int back to a quantity the API server accepts (cpu millicores -> 'NNNm')."""
    return f"{value}m" if quantity.unit_of(resource) == "millicores" else value


def admission_from_status(adm: Obj) -> core.Admission:
    podsets = []
    for a in adm.get("podSetAssignments") or ():
        topo = a.get("topologyAssignment")
        podsets.append(
            core.PodSetAssignment(
                name=a["name"],
                count=int(a.get("count", 0)),
                flavors=dict(a.get("flavors") or {}),
                usage={res: canonical(res, v) for res, v in (a.get("resourceUsage") or {}).items()},
                topology=_topology_from_status(topo) if topo else None,
            )
        )
    return core.Admission(cluster_queue=adm["clusterQueue"], podsets=tuple(podsets))


def _topology_from_status(topo: Obj) -> core.TopologyAssignment:
    """Rebuild the core's assignment: a domain's node is its hostname-level value, and the
    single domain is the deepest level at which every pod set domain agrees."""
    levels = tuple(topo.get("levels") or ())
    domains = tuple(
        core.DomainAssignment(
            values=tuple(d.get("values") or ()),
            nodes=(d["values"][-1],)
            if levels and levels[-1] == names.LABEL_HOSTNAME and d.get("values")
            else (),
            count=int(d.get("count", 0)),
        )
        for d in topo.get("domains") or ()
    )
    depth = 0
    while (
        domains
        and depth < len(levels)
        and all(
            len(d.values) > depth and d.values[depth] == domains[0].values[depth] for d in domains
        )
    ):
        depth += 1
    level = levels[depth - 1] if depth else None
    domain = domains[0].values[:depth] if depth else ()
    return core.TopologyAssignment(levels=levels, level=level, domain=domain, domains=domains)
