"""Small builders so that scenarios read like the sentence that describes them."""

from __future__ import annotations

from queuectl.core import (
    GPU,
    BorrowWithinCohort,
    ClusterQueue,
    Cohort,
    CycleResult,
    Flavor,
    FlavorFungibility,
    FlavorQuotas,
    PodSet,
    PreemptionPolicy,
    ResourceGroup,
    ResourceQuota,
    Scheduler,
    TopologyRequest,
    Workload,
)


def quota(
    flavor: str,
    nominal: int,
    borrowing: int | None = None,
    lending: int | None = None,
    resource: str = GPU,
) -> FlavorQuotas:
    return FlavorQuotas(flavor, (ResourceQuota(resource, nominal, borrowing, lending),))


def gpu_queue(
    name: str,
    *flavors: FlavorQuotas,
    cohort: str | None = "org",
    strategy: str = "BestEffortFIFO",
    preemption: PreemptionPolicy | None = None,
    fungibility: FlavorFungibility | None = None,
    weight: float = 1.0,
) -> ClusterQueue:
    return ClusterQueue(
        name,
        cohort,
        (ResourceGroup((GPU,), tuple(flavors)),),
        queueing_strategy=strategy,  # type: ignore[arg-type]
        preemption=preemption or PreemptionPolicy(),
        flavor_fungibility=fungibility or FlavorFungibility(),
        fair_weight=weight,
    )


def gpu_cohort(name: str, parent: str | None = None, *flavors: FlavorQuotas) -> Cohort:
    groups = (ResourceGroup((GPU,), tuple(flavors)),) if flavors else ()
    return Cohort(name, parent, groups)


def job(
    key: str,
    cq: str,
    gpus: int,
    *,
    pods: int = 1,
    priority: int = 0,
    created: float = 0.0,
    min_runtime: float = 0.0,
    grace: float = 0.0,
    required: str | None = None,
    preferred: str | None = None,
) -> Workload:
    """A workload of `pods` pods with `gpus` GPUs each."""
    topo = TopologyRequest(required, preferred) if required or preferred else None
    return Workload(
        key,
        cq,
        (PodSet("main", pods, {GPU: gpus}, topo),),
        priority=priority,
        created=created,
        minimum_runtime_seconds=min_runtime,
        preemption_grace_seconds=grace,
    )


def scheduler(
    *objects: object,
    flavors: tuple[str, ...] = ("h100",),
    patience: float | None = None,
    fair: tuple[str, ...] = (),
) -> Scheduler:
    """`fair`: fair-sharing preemption's rules (none: off)."""
    s = (
        Scheduler(fair_preemption=fair)
        if patience is None
        else Scheduler(preemption_patience=patience, fair_preemption=fair)
    )
    for f in flavors:
        s.upsert_flavor(Flavor(f))
    for obj in objects:
        if isinstance(obj, Flavor):
            s.upsert_flavor(obj)
        elif isinstance(obj, Cohort):
            s.upsert_cohort(obj)
        elif isinstance(obj, ClusterQueue):
            s.upsert_cluster_queue(obj)
        elif isinstance(obj, Workload):
            s.upsert_workload(obj)
        else:
            raise TypeError(obj)
    return s


def admitted(result: CycleResult) -> list[str]:
    return sorted(a.key for a in result.admitted)


def usage(s: Scheduler, cq: str, flavor: str = "h100") -> int:
    status = s.cluster_queue_status(cq)
    assert status is not None
    return status.usage.get((flavor, GPU), 0)


def reason_of(s: Scheduler, key: str) -> str:
    info = s.pending_info(key)
    assert info is not None
    return info.reason


def borrower_meets_lender(threshold: int | None, victim_priority: int) -> Scheduler:
    """x (no quota, borrowWithinCohort LowerPriority up to `threshold`) wants 4 GPUs that y
    already borrowed from the lender with a job of `victim_priority`; x's job has priority 10."""
    policy = PreemptionPolicy(borrow_within_cohort=BorrowWithinCohort("LowerPriority", threshold))
    s = scheduler(
        gpu_queue("lender", quota("h100", 4)),
        gpu_queue("x", quota("h100", 0), preemption=policy),
        gpu_queue("y", quota("h100", 0)),
        job("y/0", "y", 4, priority=victim_priority),
    )
    s.run_cycle(1.0)
    s.upsert_workload(job("x/0", "x", 4, priority=10, created=1))
    return s
