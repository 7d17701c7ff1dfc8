"""GPU time a Workload object records, as intervals for `core.cost` (pure, from its dict).

What the cluster keeps is all there is to read:
- the current (or last, once Finished) reservation: the GPUs of its admission per flavor, from
  its QuotaReserved condition's transition to the Finished transition, or to now;
- earlier admissions, ended by evictions: only their total, accumulatedPastExecutionTimeSeconds
  (counted from Admitted). Their dates are gone, so they are placed just before the last
  eviction (the Evicted condition's transition) and charged to the flavors of the current
  admission, or to flavor "-" (no price) when the workload holds none now.
A deleted Workload is gone with its history: long windows belong to the Prometheus counters.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from queuectl import convert
from queuectl.api import names
from queuectl.api.flavor import FlavorCost
from queuectl.api.views import ObjectView, WorkloadView
from queuectl.core.cost import SECONDS_PER_HOUR, Held, Price

Obj = Mapping[str, Any]

UNKNOWN_FLAVOR = "-"
"""The flavor of past admissions of a workload that holds no quota now."""


def gpus_by_flavor(admission: Obj | None) -> dict[str, float]:
    """GPUs of quota an admission holds, per flavor (nvidia.com/gpu, whatever device serves it)."""
    out: dict[str, float] = {}
    for a in (admission or {}).get("podSetAssignments") or ():
        flavor = (a.get("flavors") or {}).get(names.GPU_RESOURCE)
        amount = (a.get("resourceUsage") or {}).get(names.GPU_RESOURCE)
        if flavor and amount is not None:
            gpus = float(convert.canonical(names.GPU_RESOURCE, amount))
            if gpus > 0:
                out[flavor] = out.get(flavor, 0.0) + gpus
    return out


def _transition(view: WorkloadView, cond_type: str) -> float | None:
    return convert.parse_time((view.condition(cond_type) or {}).get("lastTransitionTime"))


def held(wl: Obj, now: float) -> list[Held]:
    """The GPU intervals a Workload records (see the module docstring for the rules)."""
    view = WorkloadView(wl)
    status = view.status
    cq = str((status.get("admission") or {}).get("clusterQueue") or "")
    finished = view.is_true(names.COND_FINISHED)
    holding = (
        bool(status.get("admission"))
        and view.is_true(names.COND_QUOTA_RESERVED)
        and (view.holds_quota or finished)
    )
    current = gpus_by_flavor(status.get("admission")) if holding else {}
    out: list[Held] = []

    def add(flavor: str, gpus: float, start: float, end: float) -> None:
        if gpus > 0 and end > start:
            out.append(Held(view.namespace, view.name, cq, flavor, gpus, start, end))

    start = _transition(view, names.COND_QUOTA_RESERVED) if current else None
    if start is not None:
        end = (_transition(view, names.COND_FINISHED) or now) if finished else now
        for flavor, gpus in current.items():
            add(flavor, gpus, start, min(end, now))
    past = float(status.get("accumulatedPastExecutionTimeSeconds") or 0)
    if past > 0:
        evicted = _transition(view, names.COND_EVICTED) or start or now
        if current:
            for flavor, gpus in current.items():
                add(flavor, gpus, evicted - past, evicted)
        else:
            asked = sum(
                ps.count * ps.requests.get(names.GPU_RESOURCE, 0)
                for ps in (convert.podset(p) for p in view.pod_sets)
            )
            add(UNKNOWN_FLAVOR, float(asked), evicted - past, evicted)
    return out


def held_all(workloads: Iterable[Obj], now: float) -> list[Held]:
    return [h for wl in workloads for h in held(wl, now)]


def prices(flavors: Iterable[Obj]) -> dict[str, Price]:
    """Flavor name -> its price now; a flavor without a (valid) spec.cost is absent."""
    out: dict[str, Price] = {}
    for f in flavors:
        raw = ObjectView(f).spec.get("cost")
        if not raw:
            continue
        try:
            cost = FlavorCost.model_validate(raw)
        except ValueError:  # refused by the API server; an old object is charged nothing
            continue
        out[ObjectView(f).name] = Price(cost.price, cost.currency)
    return out


def gpu_time(wl: Obj, flavors: Iterable[Obj], now: float) -> str | None:
    """`describe`'s line: GPU-hours held so far (all admissions) and their cost at the flavors'
    prices now; None for a workload that never held GPUs."""
    intervals = held(wl, now)
    if not intervals:
        return None
    table = prices(flavors)
    hours: dict[str, float] = {}
    for h in intervals:
        hours[h.flavor] = hours.get(h.flavor, 0.0) + h.gpus * (h.end - h.start) / SECONDS_PER_HOUR
    money: dict[str, float] = {}
    for flavor, n in hours.items():
        if (price := table.get(flavor)) is not None:
            money[price.currency] = money.get(price.currency, 0.0) + n * price.per_gpu_hour
    said = f"{sum(hours.values()):.2f} GPU-hours so far (" + ", ".join(
        f"{n:.2f} on {flavor}" for flavor, n in sorted(hours.items())
    )
    unpriced = sorted(f for f in hours if f not in table)
    cost = ", ".join(f"{v:.2f} {cur}" for cur, v in sorted(money.items()))
    if cost:
        said += f"); cost {cost} at the current price"
        return said + (f" ({', '.join(unpriced)} unpriced)" if unpriced else "")
    return said + "); no price set (ResourceFlavor spec.cost)"
