"""Bad input yields a clear reason on the objects it affects: no crash, no stuck neighbour."""

from __future__ import annotations

import pytest
from core_helpers import admitted, gpu_cohort, gpu_queue, job, quota, reason_of, scheduler

import queuectl.api.names as names
from queuectl.core import GPU, Cohort, PodSet, Scheduler, Workload
from queuectl.core import reasons as core_reasons


def neighbour_admits(s: Scheduler) -> None:
    s.upsert_workload(job("ok/0", "healthy", 1, created=100))
    assert "ok/0" in admitted(s.run_cycle(5.0))


def test_a_queue_naming_an_unknown_flavor_is_inactive() -> None:
    s = scheduler(
        gpu_queue("broken", quota("nope", 8)),
        gpu_queue("healthy", quota("h100", 8)),
        job("b/0", "broken", 1),
    )
    r = s.run_cycle(1.0)
    assert [(p.kind, p.name, p.message) for p in r.problems] == [
        ("ClusterQueue", "broken", "flavor nope not found")
    ]
    assert reason_of(s, "b/0") == "ClusterQueueInactive"
    assert [p.reason for p in r.pending if p.key == "b/0"] == ["ClusterQueueInactive"]
    status = s.cluster_queue_status("broken")
    assert status is not None and not status.active and status.pending == 1
    neighbour_admits(s)


def test_a_negative_quota_counts_as_zero_and_is_reported() -> None:
    s = scheduler(
        gpu_queue("broken", quota("h100", -4)),
        gpu_queue("healthy", quota("h100", 8)),
        job("b/0", "broken", 1),
    )
    r = s.run_cycle(1.0)
    assert any(p.name == "broken" and "negative nominalQuota -4" in p.message for p in r.problems)
    assert reason_of(s, "b/0") == "ClusterQueueInactive"
    neighbour_admits(s)


def test_a_cycle_in_cohort_parents_disables_only_that_tree() -> None:
    s = scheduler(
        Cohort("loop-a", "loop-b"),
        Cohort("loop-b", "loop-a"),
        gpu_cohort("org"),
        gpu_queue("trapped", quota("h100", 8), cohort="loop-a"),
        gpu_queue("healthy", quota("h100", 8), cohort="org"),
        job("t/0", "trapped", 1),
    )
    r = s.run_cycle(1.0)
    assert sorted((p.kind, p.name) for p in r.problems) == [
        ("Cohort", "loop-a"),
        ("Cohort", "loop-b"),
    ]
    assert reason_of(s, "t/0") == "ClusterQueueInactive"
    neighbour_admits(s)
    # Fixing the parent link brings the queue back.
    s.upsert_cohort(Cohort("loop-b", None))
    assert admitted(s.run_cycle(6.0)) == ["t/0"]


def test_a_resource_nobody_covers_blocks_only_that_workload() -> None:
    s = scheduler(gpu_queue("healthy", quota("h100", 8)))
    s.upsert_workload(Workload("w/odd", "healthy", (PodSet("main", 1, {"example.com/fpga": 1}),)))
    s.upsert_workload(job("w/fine", "healthy", 1, created=1))
    assert admitted(s.run_cycle(1.0)) == ["w/fine"]
    info = s.pending_info("w/odd")
    assert info is not None and info.reason == "NoMatchingFlavor"
    assert info.resource == "example.com/fpga"
    assert "not covered by ClusterQueue healthy" in info.message


def test_a_missing_cluster_queue_is_named() -> None:
    s = scheduler(gpu_queue("healthy", quota("h100", 8)), job("x/0", "ghost", 1))
    s.run_cycle(1.0)
    assert reason_of(s, "x/0") == "ClusterQueueNotFound"
    neighbour_admits(s)


def test_a_resource_covered_twice_is_invalid() -> None:
    from queuectl.core import ClusterQueue, FlavorQuotas, ResourceGroup, ResourceQuota

    fq = FlavorQuotas("h100", (ResourceQuota(GPU, 1),))
    s = scheduler(
        ClusterQueue("dup", None, (ResourceGroup((GPU,), (fq,)), ResourceGroup((GPU,), (fq,))))
    )
    assert any("covered by more than one" in p.message for p in s.problems())


@pytest.mark.parametrize("name", [n for n in dir(core_reasons) if n.isupper()])
def test_core_reason_spellings_match_the_api_names(name: str) -> None:
    value = getattr(core_reasons, name)
    api = {v for k, v in vars(names).items() if k.startswith("REASON_")}
    assert value in api, f"{name}={value!r} is not a REASON_* in queuectl/api/names.py"
