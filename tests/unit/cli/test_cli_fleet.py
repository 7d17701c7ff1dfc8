"""queuectl.core.fleet: the figures behind the metrics and the quota tables."""

from __future__ import annotations

import cli_objects as o
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from queuectl.api import names
from queuectl.cli._snapshot import Snapshot
from queuectl.core import GPU, Node, Taint, fleet


def snap() -> Snapshot:
    return Snapshot.from_objects(o.research_tree(), now=o.NOW)


def test_taint_name_matches_the_api() -> None:
    assert fleet.UNHEALTHY_TAINT == names.TAINT_GPU_UNHEALTHY


@pytest.mark.parametrize(
    ("free", "requests", "ratio"),
    [
        ({"a": 8, "b": 2, "c": 0}, (4,), 0.2),  # b's 2 free GPUs serve nobody
        ({"a": 8, "b": 2}, (1, 4), 0.0),  # a 1-GPU pod fits b
        ({"a": 3, "b": 3}, (8,), 1.0),
        ({"a": 0}, (1,), 0.0),  # nothing free
        ({"a": 5}, (), 0.0),  # no demand
    ],
)
def test_fragmentation(free: dict[str, int], requests: tuple[int, ...], ratio: float) -> None:
    assert fleet.fragmentation_ratio(free, requests) == pytest.approx(ratio)


@settings(max_examples=50, deadline=None)
@given(
    st.dictionaries(st.text(min_size=1, max_size=3), st.integers(0, 16), max_size=8),
    st.lists(st.integers(0, 16), max_size=5),
)
def test_fragmentation_is_a_ratio(free: dict[str, int], requests: list[int]) -> None:
    r = fleet.fragmentation_ratio(free, requests)
    assert 0.0 <= r <= 1.0
    if requests and min((x for x in requests if x > 0), default=99) <= 1:
        assert r == 0.0  # a 1-GPU pod fits any free GPU


def test_unhealthy_from_count_label_or_taint() -> None:
    nodes = [
        Node("ok", allocatable={GPU: 8}),
        Node("half", allocatable={GPU: 8}, healthy_gpus=4),
        Node("tainted", allocatable={GPU: 8}, taints=(Taint(fleet.UNHEALTHY_TAINT, "Xid"),)),
        Node("cpu-only", allocatable={"cpu": 64000}, taints=(Taint(fleet.UNHEALTHY_TAINT),)),
    ]
    assert fleet.unhealthy_gpus(nodes) == 12


def test_allocation_and_free_gpus() -> None:
    s = snap()
    (h100,) = fleet.gpu_allocation(s.sched)
    assert (h100.flavor, h100.capacity, h100.allocated, h100.ratio) == ("h100", 32, 24, 0.75)
    # admissions without a topology are not tied to nodes: the core sees every GPU free ...
    assert sum(fleet.free_gpus(s.sched).values()) == 32
    # ... so the caller passes what pods use per node when it knows
    assert fleet.free_gpus(s.sched, {"n0": 8, "n1": 8, "n2": 6}) == {
        "n0": 0,
        "n1": 0,
        "n2": 2,
        "n3": 8,
    }


def test_pending_requests_are_per_pod_and_distinct() -> None:
    objs = o.research_tree()
    objs["workloads"] += [
        o.workload("team-llm", "g", "training", 8, count=4),
        o.workload("team-llm", "h", "training", 8),
        o.workload("team-llm", "s", "training", 2),
        o.workload("team-llm", "off", "training", 1, active=False),
    ]
    s = Snapshot.from_objects(objs, now=o.NOW)
    assert fleet.pending_gpu_requests(s.sched) == (2, 8)


def test_gpu_seconds_charge_only_time_since_the_last_reading() -> None:
    s = snap()
    meter = fleet.GpuSecondsMeter()
    assert meter.advance(s.sched, o.NOW) == {}  # first reading: nothing charged twice
    used = meter.advance(s.sched, o.NOW + 10)
    assert used == {
        ("team-vision", "vision", "h100"): 80.0,
        ("team-llm", "llm", "h100"): 160.0,
    }
    assert meter.advance(s.sched, o.NOW + 10) == {}


def test_quota_table_of_unknown_names_is_none() -> None:
    s = snap()
    assert fleet.quota_table(s.sched, "nope") is None
    assert fleet.quota_table(s.sched, "nope", cohort=True) is None
    assert fleet.cohort_members(s.sched, "research") == ((), ("llm", "vision"))
