"""Node hot swap: a topology gang that loses one node moves only that node's pods.

Team A's two-pod gang runs in rack r1 on nodes a and b; a fails. When rack r1 still has a free
H100 node, only a's pod moves there and the gang keeps running; when it has none (or the free
node is of another kind, busy, cordoned, too small, in another rack), or the gang cannot keep
its placement (it lived on a alone, it has several pod sets), the whole gang is requeued as
before. A gang pinned pod by pod is swapped too: the pinning webhook reads the assignment.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest
from controller_fakes import World, merge, new_job, queued
from test_drain_shell import sample, settle
from test_node_failures import Failures

from queuectl import metrics
from queuectl.api import names
from queuectl.api.views import WorkloadView
from queuectl.controller.nodes import hotswap
from queuectl.controller.watch import kube as k
from queuectl.core import types as core

RACK = "example.com/rack"
GPU = names.GPU_RESOURCE
H100 = {names.LABEL_GPU_PRODUCT: "H100"}
FLAVORS = {"h100": {"metadata": {"name": "h100"}, "spec": {"nodeLabels": H100}}}


def node(
    name: str,
    rack: str = "r1",
    *,
    gpus: int = 8,
    product: str = "H100",
    ready: bool = True,
    cordoned: bool = False,
    taints: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    labels = {names.LABEL_GPU_PRODUCT: product, RACK: rack, names.LABEL_HOSTNAME: name}
    return {
        "metadata": {"name": name, "labels": labels},
        "spec": {"unschedulable": cordoned, "taints": taints or []},
        "status": {
            "allocatable": {GPU: str(gpus), "pods": "110"},
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
        },
    }


def workload(
    hosts: list[tuple[str, int]],
    *,
    pod_sets: int = 1,
    sliced: bool = False,
    per_pod: int = 4,
) -> dict[str, Any]:
    """A gang of one pod set required in a rack, counted on `hosts` (node, pods) of rack r1."""
    count = sum(n for _, n in hosts)
    request: dict[str, Any] = {"required": RACK}
    if sliced:
        request["podSetSliceRequiredTopologyConstraints"] = [{"topology": RACK, "size": 1}]
    assignment = {
        "name": "main",
        "count": count,
        "flavors": {GPU: "h100"},
        "resourceUsage": {GPU: per_pod * count},
        "topologyAssignment": {
            "levels": [RACK, names.LABEL_HOSTNAME],
            "domains": [{"values": ["r1", h], "count": n} for h, n in hosts],
        },
    }
    launcher = {"name": "launcher", "count": 1, "flavors": {}, "resourceUsage": {}}
    return {
        "metadata": {"name": "gang", "namespace": "team-a", "resourceVersion": "1"},
        "spec": {
            "podSets": [
                {"name": "main", "count": count, "template": {}, "topologyRequest": request}
            ]
        },
        "status": {
            "conditions": [{"type": names.COND_QUOTA_RESERVED, "status": "True"}],
            "admission": {
                "clusterQueue": "cq",
                "podSetAssignments": [assignment] + ([launcher] if pod_sets > 1 else []),
            },
        },
    }


def hosts_of(admission: dict[str, Any]) -> list[tuple[str, int]]:
    (psa,) = admission["podSetAssignments"]
    return [(d["values"][-1], d["count"]) for d in psa["topologyAssignment"]["domains"]]


TWO_ON_A_B = [("a", 1), ("b", 1)]


@pytest.mark.parametrize(
    ("case", "spare", "wl", "on_failed", "busy", "want"),
    [
        ("a free node in the rack takes a's pod", [node("c")], TWO_ON_A_B, 1, (), "c"),
        (
            "the first free one by name",
            [node("e"), node("c"), node("d")],
            TWO_ON_A_B,
            1,
            (),
            "c",
        ),
        ("the only free node is in another rack", [node("c", "r2")], TWO_ON_A_B, 1, (), None),
        ("the free node has other GPUs", [node("c", product="A100")], TWO_ON_A_B, 1, (), None),
        ("the free node is busy", [node("c")], TWO_ON_A_B, 1, ("c",), None),
        ("the free node is cordoned", [node("c", cordoned=True)], TWO_ON_A_B, 1, (), None),
        ("the free node is not Ready", [node("c", ready=False)], TWO_ON_A_B, 1, (), None),
        ("the free node is too small", [node("c", gpus=2)], TWO_ON_A_B, 1, (), None),
        (
            "the free node is tainted",
            [node("c", taints=[{"key": "x", "effect": "NoSchedule"}])],
            TWO_ON_A_B,
            1,
            (),
            None,
        ),
        # The scheduler put both pods on a (counted on a and b): the one counted on a moves to
        # c, the other is made again in the rack, where b is counted for it already.
        ("two pods were on a, one counted there", [node("c", gpus=4)], TWO_ON_A_B, 2, (), "c"),
        ("the gang lived on a alone", [node("c")], [("a", 2)], 2, (), None),
        ("the gang was counted on a alone", [node("c", gpus=8)], [("a", 2)], 2, (), None),
    ],
)
def test_a_failed_nodes_pods_move_within_the_domain_or_the_gang_is_requeued(
    case: str,
    spare: list[dict[str, Any]],
    wl: list[tuple[str, int]],
    on_failed: int,
    busy: tuple[str, ...],
    want: str | None,
) -> None:
    nodes = [node("a", ready=False), node("b"), *spare]
    found = hotswap.plan(workload(wl), "a", on_failed, nodes, FLAVORS, {"a", "b", *busy})
    if want is None:
        assert isinstance(found, str), case
        return
    assert isinstance(found, hotswap.Swap), f"{case}: {found}"
    assert (found.failed, found.replacement, found.pods) == ("a", want, dict(wl)["a"])
    moved = dict(wl)
    assert hosts_of(found.admission) == [(want if h == "a" else h, moved[h]) for h, _ in wl]


@pytest.mark.parametrize(
    ("case", "wl", "why"),
    [
        ("several pod sets", workload(TWO_ON_A_B, pod_sets=2), "several pod sets"),
        ("nothing of it on the node", workload([("b", 2)]), "none of its pods"),
        ("no free node", workload(TWO_ON_A_B), "no free node of its kind in "),
    ],
)
def test_why_a_gang_is_not_swapped(case: str, wl: dict[str, Any], why: str) -> None:
    nodes = [node("a", ready=False), node("b")]
    found = hotswap.plan(wl, "a", 0 if "nothing" in case else 1, nodes, FLAVORS, {"a", "b"})
    assert isinstance(found, str) and why in found, case


def test_a_pod_the_scheduler_put_on_the_failed_node_but_counted_elsewhere_is_made_again() -> None:
    """Counted on b and d, bound to a: nothing in the admission moves, no free node needed."""
    wl = workload([("b", 1), ("d", 1)])
    found = hotswap.plan(wl, "a", 1, [node("a"), node("b"), node("d")], FLAVORS, {"a", "b", "d"})
    assert isinstance(found, hotswap.Swap)
    assert (found.replacement, found.pods) == (None, 0)
    assert found.admission == wl["status"]["admission"]


def test_a_gang_pinned_pod_by_pod_is_swapped_its_pins_follow_the_assignment() -> None:
    """Its pins are in the running job's template; the pinning webhook reads the assignment."""
    wl = workload(TWO_ON_A_B, sliced=True)
    found = hotswap.plan(wl, "a", 1, [node("a"), node("b"), node("c")], FLAVORS, {"a", "b"})
    assert isinstance(found, hotswap.Swap) and found.replacement == "c"
    assert hosts_of(found.admission) == [("c", 1), ("b", 1)]


def test_the_swap_keeps_the_rest_of_the_status_and_leaves_the_workload_untouched() -> None:
    wl = workload(TWO_ON_A_B)
    before = copy.deepcopy(wl)
    found = hotswap.plan(wl, "a", 1, [node("a"), node("b"), node("c")], FLAVORS, {"a", "b"})
    assert isinstance(found, hotswap.Swap)
    assert wl == before
    (psa,) = found.admission["podSetAssignments"]
    assert psa["resourceUsage"] == {GPU: 8} and psa["count"] == 2
    assert psa["topologyAssignment"]["domains"][0] == {"values": ["r1", "c"], "count": 1}


def test_busy_nodes_are_those_an_admission_names_or_a_gpu_pod_runs_on() -> None:
    held = workload(TWO_ON_A_B)
    waiting = merge(workload([("c", 1)]), {"status": {"conditions": []}})

    def pod(name: str, node_name: str, gpus: int, phase: str = "Running") -> dict[str, Any]:
        container = {"name": "c", "resources": {"requests": {GPU: str(gpus), "cpu": "1"}}}
        return {
            "metadata": {"name": name, "namespace": "x"},
            "spec": {"nodeName": node_name, "containers": [container]},
            "status": {"phase": phase},
        }

    pods = [pod("gpu", "d", 1), pod("cpu-only", "e", 0), pod("done", "f", 8, "Succeeded")]
    assert hotswap.busy_nodes([held, waiting], pods) == {"a", "b", "d"}


# --- the drainer ------------------------------------------------------------------------------
async def rack_world(spare_in_rack: bool) -> tuple[World, str, Failures]:
    """Team A's Job `train`, two pods of 4 GPUs required in a rack, admitted on n1 and n2 of
    rack r1, each pod running where it was counted; n3 is in r1 too (free when
    `spare_in_rack`), n0 in r2."""
    w = World()
    job = new_job()
    job["spec"] |= {"parallelism": 2, "completions": 2}
    template = job["spec"]["template"]
    template["metadata"] = {"annotations": {names.ANNOTATION_PODSET_REQUIRED_TOPOLOGY: RACK}}
    template["spec"]["containers"][0]["resources"]["requests"][GPU] = "4"
    key = await queued(w, job)
    domains = tuple(core.DomainAssignment(("r1", n), (n,), 1) for n in ("n1", "n2"))
    topo = core.TopologyAssignment((RACK, names.LABEL_HOSTNAME), RACK, ("r1",), domains)
    admission = core.Admission(
        "cq", (core.PodSetAssignment("main", 2, {GPU: "h100"}, {GPU: 8}, topo),)
    )
    assert await w.decisions().admit(key, admission)
    h = Failures(w)
    for name, rack in (
        ("n0", "r2"),
        ("n1", "r1"),
        ("n2", "r1"),
        ("n3", "r1" if spare_in_rack else "r2"),
    ):
        h.set_node(name, metadata={"labels": {RACK: rack, names.LABEL_HOSTNAME: name}})
    w.add(k.JOBS, merge(w.job(), {"status": {"active": 2, "startTime": "t"}}))
    h.bind_pod(w.job(), "n1")
    h.bind_pod(w.job(), "n2")
    return w, key, h


async def test_a_dark_node_under_a_rack_gang_moves_its_pod_to_the_racks_free_node() -> None:
    w, key, h = await rack_world(spare_in_rack=True)
    swaps = sample(metrics.CONTROLLER_NODE_HOT_SWAPS)
    forced = sample(metrics.CONTROLLER_PODS_FORCE_DELETED)
    h.go_dark("n1", since=w.now)
    w.now += 301
    await h.drainer.pass_once()
    assert h.node("n1")["spec"]["unschedulable"] is True  # drained as before
    assert await h.run_queued() == [key]

    wl = w.workload()
    assert WorkloadView(wl).holds_quota and not WorkloadView(wl).is_true(names.COND_EVICTED)
    assert hosts_of(WorkloadView(wl).admission or {}) == [("n3", 1), ("n2", 1)]
    assert w.job()["spec"]["suspend"] is False  # the gang keeps running
    assert ("delete", "pods", "train-n1") in w.kube.writes  # its pod there is recreated
    assert sample(metrics.CONTROLLER_PODS_FORCE_DELETED) == forced + 1  # no kubelet confirms
    assert ("delete", "pods", "train-n2") not in w.kube.writes
    assert sample(metrics.CONTROLLER_NODE_HOT_SWAPS) == swaps + 1
    # The core counts the pod on n3 now.
    (charge,) = w.sched.state.charges.values()
    assert set(charge.nodes) == {"n2", "n3"}
    await settle()
    events = [
        o
        for (plural, _, _), o in w.kube.objects.items()
        if plural == "events" and o["reason"] == names.EVENT_NODE_HOT_SWAPPED
    ]
    assert len(events) == 1 and "move to node n3" in events[0]["note"]

    # The next pass, with the deleted pod still in the cache, moves nothing and evicts nothing.
    await h.drainer.pass_once()
    assert h.queued == []


async def test_a_dark_node_under_a_rack_gang_without_a_free_node_requeues_the_gang() -> None:
    w, key, h = await rack_world(spare_in_rack=False)
    h.go_dark("n1", since=w.now)
    w.now += 301
    await h.drainer.pass_once()
    assert await h.run_queued() == [key]
    evicted = WorkloadView(w.workload()).condition(names.COND_EVICTED) or {}
    assert evicted.get("reason") == names.REASON_EVICTED_NODE_FAILURES
    assert "no node hot swap: no free node of its kind in " in evicted["message"]
    assert w.job()["spec"]["suspend"] is True


async def test_a_bad_gpu_under_a_rack_gang_moves_its_pod_with_its_grace_period() -> None:
    """The node's kubelet works: the pod is deleted as usual (its grace period to stop), not
    forced, and not counted as force-deleted."""
    w, key, h = await rack_world(spare_in_rack=True)
    forced = sample(metrics.CONTROLLER_PODS_FORCE_DELETED)
    deletes: list[tuple[str, Any]] = []
    real_delete = w.kube.delete

    async def delete(res: Any, name: str, namespace: str | None = None, **kw: Any) -> Any:
        deletes.append((name, kw.get("grace_period_s")))
        return await real_delete(res, name, namespace, **kw)

    w.kube.delete = delete  # type: ignore[method-assign]
    h.break_gpu("n1")
    await h.drainer.pass_once()
    assert await h.run_queued() == [key]
    assert hosts_of(WorkloadView(w.workload()).admission or {}) == [("n3", 1), ("n2", 1)]
    assert deletes == [("train-n1", None)]
    assert sample(metrics.CONTROLLER_PODS_FORCE_DELETED) == forced
    assert not WorkloadView(w.workload()).is_true(names.COND_EVICTED)


async def test_a_swap_written_before_a_restart_is_finished_without_another_node() -> None:
    """The admission names n3 already (a swap written, then the controller restarted before
    deleting the pod on n1): a new drainer deletes the pod and evicts nothing, although the
    rack has no free node left."""
    w, key, h = await rack_world(spare_in_rack=True)
    wl = w.workload()
    admission = WorkloadView(wl).admission or {}
    domains = admission["podSetAssignments"][0]["topologyAssignment"]["domains"]
    domains[0]["values"] = ["r1", "n3"]
    w.add(k.WORKLOADS, merge(copy.deepcopy(wl), {"status": {"admission": admission}}))
    h.go_dark("n1", since=w.now)
    w.now += 301
    await h.drainer.pass_once()
    assert await h.run_queued() == [key]
    after = WorkloadView(w.workload())
    assert after.holds_quota and not after.is_true(names.COND_EVICTED)
    assert hosts_of(after.admission or {}) == [("n3", 1), ("n2", 1)]
    assert ("delete", "pods", "train-n1") in w.kube.writes
