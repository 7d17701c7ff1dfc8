"""ClusterQueue and LocalQueue status, computed from the core and the cache (pure)."""

from __future__ import annotations

import copy
from collections import defaultdict
from collections.abc import Iterable, Mapping
from typing import Any, Final

from queuectl import convert
from queuectl.api import names
from queuectl.api.views import ObjectView, WorkloadView
from queuectl.controller.admission import status
from queuectl.controller.feed.feed import Feed
from queuectl.controller.watch.kube import Obj
from queuectl.core.results import QueueStatus

Usage = Mapping[tuple[str, str], int]


def flavors_usage(usage: Usage, borrowed: Usage, order: Iterable[str]) -> list[dict[str, Any]]:
    """[{name: flavor, resources: [{name, total, borrowed}]}], flavors in `order` first."""
    by_flavor: dict[str, dict[str, dict[str, Any]]] = defaultdict(dict)
    for (flavor, res), total in usage.items():
        by_flavor[flavor][res] = {
            "name": res,
            "total": convert.quantity_string(res, total),
            "borrowed": convert.quantity_string(res, borrowed.get((flavor, res), 0)),
        }
    ordered = [f for f in order if f in by_flavor] + sorted(f for f in by_flavor if f not in order)
    return [
        {"name": f, "resources": [by_flavor[f][r] for r in sorted(by_flavor[f])]} for f in ordered
    ]


def flavor_order(cq: Obj) -> list[str]:
    out: list[str] = []
    for group in ObjectView(cq).spec.get("resourceGroups") or ():
        out += [f["name"] for f in group.get("flavors") or () if f["name"] not in out]
    return out


def _with_condition(obj: Obj, active: bool, reason: str, message: str, now: float) -> list[Any]:
    conds = copy.deepcopy(list(ObjectView(obj).status.get("conditions") or []))
    status.set_condition(conds, names.COND_ACTIVE, active, reason, message, now)
    return conds


def waiting_for_checks(workloads: Iterable[Obj]) -> dict[str, int]:
    """ClusterQueue -> workloads holding quota there that their admission checks still hold."""
    out: dict[str, int] = defaultdict(int)
    for wl in workloads:
        view = WorkloadView(wl)
        if view.holds_quota and not view.is_admitted:
            out[str(wl["status"]["admission"].get("clusterQueue", ""))] += 1
    return out


BANK_WRITE_INTERVAL_S = 30.0
"""A ClusterQueue's GPU time balance is rewritten at most this often while its sign stays."""


def gpu_time_bank_status(
    cq: Obj, balance: float | None, now: float, interval_s: float = BANK_WRITE_INTERVAL_S
) -> dict[str, Any] | None:
    """status.gpuTimeBank: the balance moves a little with every second, so it is written at
    most every `interval_s` (the written lastUpdateTime says when), at once when it changes
    sign (credit starts or stops counting in decisions), and never when it has not moved
    (a queue at zero or at its cap). None: the queue has no bank (the field is removed)."""
    if balance is None:
        return None
    value = round(balance, 3)
    old = ObjectView(cq).status.get("gpuTimeBank")
    if old:
        written = float(old.get("balanceGPUHours", 0.0))
        at = convert.parse_time(old.get("lastUpdateTime"))
        if written == value:
            return dict(old)
        if at is not None and now - at < interval_s and (written > 0) == (value > 0):
            return dict(old)
    return {"balanceGPUHours": value, "lastUpdateTime": convert.format_time(now)}


INT64_MAX: Final = 2**63 - 1


def per_mille(share: float) -> int:
    """A weighted share as status writes it: per mille, an int64. A weight-0 queue that
    borrows has an infinite share; it is written as the largest int64, as Kueue does."""
    return INT64_MAX if share == float("inf") else min(round(share * 1000), INT64_MAX)


def cluster_queue_quota(qs: QueueStatus | None, order: Iterable[str] = ()) -> dict[str, Any]:
    """What a namespace user needs to know of their ClusterQueue's quota (a LocalQueue's
    `status.clusterQueueQuota`): per flavor and resource its nominal quota, what it uses and
    what it could borrow now, what its pending workloads ask for per resource, and a one-line
    GPU summary for `kubectl get localqueue -o wide`."""
    if qs is None:
        return {"flavors": [], "pending": [], "gpus": "unknown: not yet seen by the scheduler"}
    by_flavor: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for (flavor, res), nominal in sorted(qs.nominal.items()):
        used = qs.usage.get((flavor, res), 0)
        borrowable = max(0, qs.available.get((flavor, res), 0) - max(0, nominal - used))
        by_flavor[flavor].append(
            {
                "name": res,
                "nominal": convert.quantity_string(res, nominal),
                "used": convert.quantity_string(res, used),
                "borrowable": convert.quantity_string(res, borrowable),
            }
        )
    ordered = [f for f in order if f in by_flavor] + sorted(f for f in by_flavor if f not in order)
    pending = [
        {"name": res, "requested": convert.quantity_string(res, amount)}
        for res, amount in sorted(qs.pending_requests.items())
    ]
    return {
        "flavors": [{"name": f, "resources": by_flavor[f]} for f in ordered],
        "pending": pending,
        "gpus": _gpu_line(qs),
    }


def _gpu_line(qs: QueueStatus) -> str:
    gpu = names.GPU_RESOURCE
    frs = [fr for fr in qs.nominal if fr[1] == gpu]
    if not frs:
        return "no GPU quota"
    nominal = sum(qs.nominal[fr] for fr in frs)
    used = sum(qs.usage.get(fr, 0) for fr in frs)
    borrowable = sum(
        max(0, qs.available.get(fr, 0) - max(0, qs.nominal[fr] - qs.usage.get(fr, 0))) for fr in frs
    )
    pending = qs.pending_requests.get(gpu, 0)
    return f"{used}/{nominal} used, +{borrowable} borrowable, {pending} pending"


def cluster_queue_status(
    cq: Obj, qs: QueueStatus | None, now: float, waiting: int = 0, bank: float | None = None
) -> dict[str, Any]:
    """`waiting`: of the workloads holding quota, those not admitted yet (admission checks);
    `bank`: the queue's GPU time balance (None: no bank)."""
    stop = ObjectView(cq).spec.get("stopPolicy") or "None"
    if qs is None:
        active, reason, message = False, names.REASON_PENDING, "Not yet seen by the scheduler"
    elif stop != "None":
        active, reason = False, names.REASON_CLUSTER_QUEUE_STOPPED
        message = f"stopPolicy is {stop}; set it to None to admit again"
    elif not qs.active:  # a bad spec, or checks missing / not Active (AdmissionCheck...)
        active, reason = False, qs.reason or names.REASON_INVALID_SPEC
        message = qs.problem or "The ClusterQueue cannot admit workloads"
    else:
        active, reason, message = True, names.REASON_READY, "Can admit new workloads"
    usage = flavors_usage(qs.usage, qs.borrowed, flavor_order(cq)) if qs is not None else []
    out = {
        "pendingWorkloads": qs.pending if qs else 0,
        "reservingWorkloads": qs.admitted if qs else 0,
        "admittedWorkloads": max(0, qs.admitted - waiting) if qs else 0,
        "flavorsReservation": usage,
        "flavorsUsage": usage,
        "fairSharing": {"weightedShare": per_mille(qs.weighted_share) if qs else 0},
        "conditions": _with_condition(cq, active, reason, message, now),
    }
    banked = gpu_time_bank_status(cq, bank, now)
    if banked is not None or ObjectView(cq).status.get("gpuTimeBank") is not None:
        out["gpuTimeBank"] = banked  # None removes it (a merge patch)
    return out


def local_queue_statuses(
    lqs: Iterable[Obj],
    workloads: Iterable[Obj],
    feed: Feed,
    cq_active: Mapping[str, bool],
    now: float,
    cq_quota: Mapping[str, dict[str, Any]] | None = None,
) -> dict[tuple[str, str], dict[str, Any]]:
    """(namespace, name) -> status for every LocalQueue; `cq_quota`: each ClusterQueue's
    `cluster_queue_quota`, copied into the LocalQueues that send work to it."""
    pending: dict[tuple[str, str], int] = defaultdict(int)
    admitted: dict[tuple[str, str], int] = defaultdict(int)
    reserving: dict[tuple[str, str], int] = defaultdict(int)
    usage: dict[tuple[str, str], dict[tuple[str, str], int]] = defaultdict(lambda: defaultdict(int))
    for wl in workloads:
        view = WorkloadView(wl)
        if view.is_true(names.COND_FINISHED):
            continue
        lq_key = (view.namespace, view.queue_name)
        if view.holds_quota:
            reserving[lq_key] += 1
            admitted[lq_key] += 1 if view.is_admitted else 0
            adm = convert.admission_from_status(wl["status"]["admission"])
            for ps in adm.podsets:
                for res, total in ps.usage.items():
                    usage[lq_key][(ps.flavors.get(res, ""), res)] += total
        else:
            pending[lq_key] += 1
    out = {}
    for lq in lqs:
        meta, spec = lq["metadata"], ObjectView(lq).spec
        key = (meta.get("namespace", ""), meta["name"])
        cq = spec.get("clusterQueue", "")
        stop = spec.get("stopPolicy") or "None"
        if stop != "None":
            active, reason, message = False, names.REASON_LOCAL_QUEUE_STOPPED, f"stopPolicy {stop}"
        elif cq not in cq_active:
            active, reason = False, names.REASON_CLUSTER_QUEUE_NOT_FOUND
            message = f"ClusterQueue {cq} does not exist"
        elif not feed.cache.namespace_selected(cq, key[0]):
            active, reason = False, names.REASON_NAMESPACE_NOT_SELECTED
            message = f"ClusterQueue {cq} does not select namespace {key[0]}"
        elif not cq_active[cq]:
            active, reason, message = False, names.REASON_CLUSTER_QUEUE_STOPPED, f"{cq} inactive"
        else:
            active, reason, message = True, names.REASON_READY, "Can submit new workloads"
        used = usage.get(key, {})
        fl = flavors_usage(used, {}, [])
        out[key] = {
            "pendingWorkloads": pending.get(key, 0),
            "reservingWorkloads": reserving.get(key, 0),
            "admittedWorkloads": admitted.get(key, 0),
            "flavorsReservation": fl,
            "flavorsUsage": fl,
            "conditions": _with_condition(lq, active, reason, message, now),
        }
        if cq_quota is not None and cq in cq_quota:
            out[key]["clusterQueueQuota"] = cq_quota[cq]
    return out


COUNTS_REFRESH_S: Final = 10.0
"""How stale a queue's counts may get in its status. Under a backlog they change with every
admission, and writing them each round cost the API server about one request in thirteen per
admission; users read them with `kubectl get`, and the live figures are the gauges."""

COUNTS: Final = frozenset(
    {
        "pendingWorkloads",
        "reservingWorkloads",
        "admittedWorkloads",
        "flavorsReservation",
        "flavorsUsage",
        "fairSharing",
        "clusterQueueQuota",
    }
)


def due(
    obj: Obj,
    new_status: Mapping[str, Any],
    last_written: float | None,
    now: float,
    refresh_s: float = COUNTS_REFRESH_S,
) -> bool:
    """Write this status now? At once when anything but the counts changed (a condition, the
    GPU time bank); when only counts changed, once `refresh_s` has passed since this
    controller last wrote it (never written by this controller: at once)."""
    old = ObjectView(obj).status
    moved = {k for k, v in new_status.items() if old.get(k) != v}
    if not moved:
        return False
    if moved - COUNTS or last_written is None:
        return True
    return now - last_written >= refresh_s
