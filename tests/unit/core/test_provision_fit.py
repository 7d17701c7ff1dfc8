"""Whether the nodes there now can hold a reservation's pods (core.provision.unplaced)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from queuectl.core.provision import Shape, gpu_demand, unplaced
from queuectl.core.types import GPU, Node, Taint, Toleration

H100: dict[str, tuple[str, ...]] = {"gpu": ("h100",)}


def node(name: str, gpus: int = 8, *, product: str = "h100", **kw: object) -> Node:
    return Node(name, labels={"gpu": product}, allocatable={GPU: gpus, "pods": 110}, **kw)  # type: ignore[arg-type]


def gang(count: int, gpus: int = 8, allowed: dict[str, tuple[str, ...]] = H100) -> Shape:
    return Shape("main", {GPU: gpus}, count, allowed)


@pytest.mark.parametrize(
    ("nodes", "used", "shape", "left"),
    [
        ([node("a"), node("b")], {}, gang(2), {}),
        ([node("a"), node("b")], {}, gang(4), {"main": 2}),
        ([node("a"), node("b")], {"a": {GPU: 4}}, gang(2), {"main": 1}),
        ([node("a")], {"a": {GPU: 4}}, gang(2, gpus=2), {}),
        ([node("a", product="a100")], {}, gang(1), {"main": 1}),
        ([node("a", unschedulable=True)], {}, gang(1), {"main": 1}),
        ([node("a", taints=(Taint("t", "v", "NoSchedule"),))], {}, gang(1), {"main": 1}),
    ],
    ids=["fits", "two-short", "half-used", "packs-small", "wrong-flavor", "cordoned", "tainted"],
)
def test_unplaced_pods(
    nodes: list[Node], used: dict[str, dict[str, int]], shape: Shape, left: dict[str, int]
) -> None:
    assert unplaced(nodes, used, [shape]) == left


def test_a_tolerated_taint_does_not_keep_pods_off() -> None:
    tainted = node("a", taints=(Taint("t", "v", "NoSchedule"),))
    shape = Shape("main", {GPU: 8}, 1, H100, (Toleration("t", "Equal", "v", "NoSchedule"),))
    assert unplaced([tainted], {}, [shape]) == {}


def test_two_pod_sets_do_not_both_count_the_same_free_gpus() -> None:
    shapes = [Shape("a", {GPU: 8}, 1, H100), Shape("b", {GPU: 4}, 1, H100)]
    assert unplaced([node("n")], {}, shapes) == {"b": 1}


def test_gpu_demand_counts_gpus_and_mig_profiles_apart_per_flavor() -> None:
    shapes = [Shape("a", {GPU: 8, "cpu": 4000}, 2), Shape("b", {"nvidia.com/mig-1g.10gb": 1}, 3)]
    demand = gpu_demand(shapes, {"a": "h100", "b": "h100-mig"}, lambda r: r.startswith("nvidia"))
    assert demand == {("h100", GPU): 16, ("h100-mig", "nvidia.com/mig-1g.10gb"): 3}


@given(st.lists(st.integers(0, 8), min_size=1, max_size=6), st.integers(1, 8), st.integers(0, 12))
def test_never_more_placed_than_the_free_gpus_hold(
    used: list[int], per_pod: int, count: int
) -> None:
    nodes = [node(f"n{i}") for i in range(len(used))]
    taken = {f"n{i}": {GPU: u} for i, u in enumerate(used)}
    left = unplaced(nodes, taken, [gang(count, per_pod)]).get("main", 0)
    room = sum((8 - u) // per_pod for u in used)
    assert count - left == min(count, room)
