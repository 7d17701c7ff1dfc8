"""The Observer over the in-memory API server of the reconcile tests: GPU-seconds charged from
admission to finish whatever the refresh schedule, allocation and fragmentation read off the
core, and every Finished, Evicted and Preempted transition counted once, by the leader only."""

from __future__ import annotations

import asyncio
import copy

import pytest
from controller_fakes import FakeKube, World, admitted_world, gpu_node, merge, new_job
from hypothesis import given, settings
from hypothesis import strategies as st

from queuectl import metrics
from queuectl.api import names
from queuectl.api.views import WorkloadView
from queuectl.controller.manager import Controller
from queuectl.controller.observe import Observer
from queuectl.controller.watch import kube as k
from queuectl.core.results import Preemption

REG = metrics.CONTROLLER_REGISTRY


def value(name: str, **labels: str) -> float:
    return REG.get_sample_value(name, labels) or 0.0


def gpu_seconds() -> float:
    return value("queuectl_gpu_seconds_total", namespace="ns", cluster_queue="cq", flavor="h100")


def finished(reason: str = names.REASON_FINISHED_SUCCEEDED) -> float:
    return value("queuectl_finished_workloads_total", cluster_queue="cq", reason=reason)


def observe(w: World, *, leading: bool = True) -> Observer:
    return Observer(w.sched, w.cache, leading=lambda: leading, clock=lambda: w.now)


def complete(w: World) -> None:
    done = {"status": {"conditions": [{"type": "Complete", "status": "True"}]}}
    w.add(k.JOBS, merge(w.job(), done))


def pending_job(w: World, name: str, gpus: int) -> None:
    job = copy.deepcopy(new_job())
    job["metadata"]["name"] = name
    (c,) = job["spec"]["template"]["spec"]["containers"]
    c["resources"]["requests"][names.GPU_RESOURCE] = str(gpus)
    w.add(k.JOBS, job)


# --- GPU-seconds ---------------------------------------------------------------------------
async def test_an_8_gpu_job_is_charged_from_the_first_reading_to_its_finish() -> None:
    w, key = await admitted_world()
    o = observe(w)
    before = gpu_seconds()
    o.after_cycle(w.now)  # the first reading charges nothing (a restart charges no past)
    assert gpu_seconds() == before

    w.now += 10
    o.after_cycle(w.now)
    assert gpu_seconds() == before + 80

    w.now += 0.5
    o.after_cycle(w.now)  # rate-limited: too soon after the last refresh
    assert o.refreshed_at == w.now - 0.5
    assert gpu_seconds() == before + 80

    w.now += 3.5  # finishes between two readings: its last 4 s are charged as it leaves
    complete(w)
    await w.rec.reconcile(key)
    assert not w.sched.is_admitted(key)
    assert gpu_seconds() == before + 112

    w.now += 10
    o.after_cycle(w.now)
    assert gpu_seconds() == before + 112


def gpu_cost(currency: str = "USD") -> float:
    return value(
        "queuectl_gpu_cost_total",
        namespace="ns",
        cluster_queue="cq",
        flavor="h100",
        currency=currency,
    )


def price_h100(w: World, cost: dict[str, str] | None) -> None:
    flavor = copy.deepcopy(w.cache.get(k.RESOURCE_FLAVORS, "h100") or {})
    flavor.setdefault("spec", {}).pop("cost", None)
    if cost is not None:
        flavor["spec"]["cost"] = cost
    w.add(k.RESOURCE_FLAVORS, flavor)


async def test_cost_follows_the_gpu_seconds_at_the_price_in_force_when_charged() -> None:
    """8 GPUs on h100: free at first, then 2.50 USD an hour, then 5.00 from the next reading
    on (the counter never re-prices what it already added), then an unparseable price."""
    w, key = await admitted_world()
    o = observe(w)
    o.refresh(w.now)
    before = gpu_cost()

    w.now += 900
    o.refresh(w.now)  # no price: GPU-seconds only
    assert gpu_cost() == before

    price_h100(w, {"gpuHourPrice": "2.50", "currency": "USD"})
    w.now += 1800  # 8 GPUs x 0.5 h x 2.50
    o.refresh(w.now)
    assert gpu_cost() == pytest.approx(before + 10.0)

    price_h100(w, {"gpuHourPrice": "5", "currency": "USD"})
    w.now += 900  # 8 x 0.25 h x 5 at the next reading ...
    o.refresh(w.now)
    assert gpu_cost() == pytest.approx(before + 20.0)
    w.now += 900  # ... and again for its last 900 s, charged as it finishes
    complete(w)
    await w.rec.reconcile(key)
    assert gpu_cost() == pytest.approx(before + 30.0)

    price_h100(w, {"gpuHourPrice": "-1"})  # refused by the API server; never a negative cost
    assert o._price("h100") is None


@settings(max_examples=30, deadline=None)
@given(
    readings=st.lists(st.floats(min_value=0.0, max_value=100.0), min_size=1, max_size=8),
    runtime=st.floats(min_value=0.0, max_value=100.0),
)
def test_gpu_seconds_never_depend_on_when_the_readings_happen(
    readings: list[float], runtime: float
) -> None:
    """Whatever the refresh schedule, the charge is GPUs x (finish - first reading)."""

    async def scenario() -> tuple[float, float, float]:
        w, key = await admitted_world()
        o = observe(w)
        start = w.now
        before = gpu_seconds()
        first = None
        for offset in sorted(r for r in readings if r <= runtime):
            w.now = start + offset
            o.refresh(w.now)
            first = offset if first is None else first
        w.now = start + runtime
        complete(w)
        await w.rec.reconcile(key)
        o.refresh(w.now + 50)
        expected = 0.0 if first is None else 8 * (runtime - first)
        return gpu_seconds() - before, expected, before

    charged, expected, total = asyncio.run(scenario())
    # float precision: epoch timestamps resolve ~2.4e-7 s (x 8 GPUs), and the counter is shared
    # by every test, so its running total costs digits too
    assert charged == pytest.approx(expected, abs=1e-5 + 1e-9 * total)


# --- allocation and fragmentation ----------------------------------------------------------
async def test_allocation_per_flavor_and_a_deleted_flavor_leaves_no_series() -> None:
    w, _ = await admitted_world()
    w.add(k.NODES, gpu_node("n0"))
    w.add(k.NODES, gpu_node("n1"))
    o = observe(w)
    o.refresh(w.now)
    assert value("queuectl_flavor_gpus", flavor="h100", kind="capacity") == 16
    assert value("queuectl_flavor_gpus", flavor="h100", kind="allocated") == 8
    assert value("queuectl_gpu_allocation_ratio", flavor="h100") == 0.5

    w.add(k.NODES, gpu_node("n1", unschedulable=True))  # a cordoned node is no capacity
    o.refresh(w.now + 1)
    assert value("queuectl_gpu_allocation_ratio", flavor="h100") == 1.0

    w.add(k.RESOURCE_FLAVORS, {"metadata": {"name": "spare"}, "spec": {}})
    o.refresh(w.now + 2)
    assert REG.get_sample_value("queuectl_gpu_allocation_ratio", {"flavor": "spare"}) == 0.0
    spare = w.cache.get(k.RESOURCE_FLAVORS, "spare")
    assert spare is not None
    w.cache.store(k.RESOURCE_FLAVORS).apply("DELETED", spare)
    o.refresh(w.now + 3)
    assert REG.get_sample_value("queuectl_gpu_allocation_ratio", {"flavor": "spare"}) is None
    labels = {"flavor": "spare", "kind": "capacity"}
    assert REG.get_sample_value("queuectl_flavor_gpus", labels) is None


@pytest.mark.parametrize(
    ("nodes", "pending", "ratio"),
    [
        ({"n0": 8}, None, 0.0),  # nothing pending: nothing stranded
        ({"n0": 8, "small": 4}, 8, 4 / 12),  # 4 free GPUs where an 8-GPU pod cannot go
        ({"n0": 8, "small": 4}, 4, 0.0),  # a 4-GPU pod fits either
        ({"small": 4}, 8, 1.0),
    ],
)
def test_fragmentation_counts_free_gpus_no_pending_pod_fits(
    nodes: dict[str, int], pending: int | None, ratio: float
) -> None:
    w = World()
    for name, gpus in nodes.items():
        w.add(k.NODES, merge(gpu_node(name), {"status": {"allocatable": {"nvidia.com/gpu": gpus}}}))
    if pending is not None:
        pending_job(w, "waiting", pending)
        asyncio.run(w.rec.reconcile_job("Job", "ns", "waiting"))
    o = observe(w)
    o.refresh(w.now)
    assert value("queuectl_gpu_fragmentation_ratio") == pytest.approx(ratio)


# --- transitions ---------------------------------------------------------------------------
async def test_a_finish_is_counted_once_per_queue_and_reason() -> None:
    w, key = await admitted_world()
    observe(w)
    before = finished()
    complete(w)
    await w.rec.reconcile(key)
    await w.rec.reconcile(key)  # reconciling a finished workload again counts nothing
    wl = w.workload()
    w.cache.store(k.WORKLOADS).apply("MODIFIED", merge(copy.deepcopy(wl), {"metadata": {}}))
    assert finished() == before + 1


async def test_transitions_seen_in_the_initial_list_are_history_not_news() -> None:
    w, key = await admitted_world()
    complete(w)
    await w.rec.reconcile(key)
    done = copy.deepcopy(w.workload())
    fresh = World()  # a restarted controller lists the finished workload
    observe(fresh)
    before = finished()
    fresh.cache.store(k.WORKLOADS).apply("ADDED", done)
    assert finished() == before


async def test_preemption_then_eviction_counted_once_each_with_their_reasons() -> None:
    w, key = await admitted_world()
    observe(w)
    preempted = value("queuectl_preempted_workloads_total", reason="InClusterQueue")
    evicted = value("queuectl_evicted_workloads_total", reason=names.REASON_EVICTED_PREEMPTION)
    w.add(k.JOBS, merge(w.job(), {"status": {"active": 1, "startTime": "t"}}))
    notice = Preemption(key, "ns/other", "InClusterQueue", "priority", w.now + 60)
    await w.decisions().preempt(notice)
    await w.decisions().preempt(notice)  # a repeated notice is no second preemption
    w.now += 61
    await w.rec.reconcile(key)  # the grace period is over: evicted
    await w.rec.reconcile(key)
    assert value("queuectl_preempted_workloads_total", reason="InClusterQueue") == preempted + 1
    assert (
        value("queuectl_evicted_workloads_total", reason=names.REASON_EVICTED_PREEMPTION)
        == evicted + 1
    )


async def test_node_failure_evictions_are_left_to_the_drainer() -> None:
    w, _ = await admitted_world()
    observe(w)
    reason = names.REASON_EVICTED_NODE_FAILURES
    before = value("queuectl_evicted_workloads_total", reason=reason)
    await w.rec.evict(w.workload(), reason, "node n1 lost a GPU")
    assert WorkloadView(w.workload()).is_true(names.COND_EVICTED)
    assert value("queuectl_evicted_workloads_total", reason=reason) == before


async def test_a_follower_counts_and_charges_nothing() -> None:
    w, key = await admitted_world()
    o = observe(w, leading=False)
    o.meter.last = w.now  # even with a reading on record
    before = (finished(), gpu_seconds())
    w.now += 30
    complete(w)
    await w.rec.reconcile(key)
    assert (finished(), gpu_seconds()) == before


# --- the hook ------------------------------------------------------------------------------
async def test_the_controller_refreshes_after_each_cycle_and_hears_workloads_first() -> None:
    now = 1_000.0
    c = Controller(FakeKube(), clock=lambda: now)  # type: ignore[arg-type]
    assert c.cache.store(k.WORKLOADS).listeners[0] == c.observer.on_workload
    await c.run_cycle()
    assert c.observer.refreshed_at == now
