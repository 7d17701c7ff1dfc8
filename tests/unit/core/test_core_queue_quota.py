"""What a namespace user sees of their ClusterQueue's quota: its own, what it uses, what it could
borrow now, and what its pending workloads ask for."""

from __future__ import annotations

from core_helpers import gpu_queue, job, quota, scheduler

from queuectl.controller.queues.queues import cluster_queue_quota

GPU = "nvidia.com/gpu"


def test_team_a_runs_4_of_its_8_and_could_borrow_bs_idle_8_while_32_more_wait() -> None:
    s = scheduler(
        gpu_queue("a", quota("h100", 8)),
        gpu_queue("b", quota("h100", 8)),
        job("a/run", "a", 4),
        job("a/big", "a", 32),  # more than the cohort has: it waits
    )
    s.run_cycle(1.0)
    qs = s.cluster_queue_status("a")
    assert qs is not None
    assert qs.nominal == {("h100", GPU): 8}
    assert qs.usage == {("h100", GPU): 4}
    assert qs.available == {("h100", GPU): 12}  # its 4 unused and b's 8
    assert qs.pending_requests == {GPU: 32}
    shown = cluster_queue_quota(qs)
    assert shown["gpus"] == "4/8 used, +8 borrowable, 32 pending"
    assert shown["flavors"] == [
        {
            "name": "h100",
            "resources": [{"name": GPU, "nominal": 8, "used": 4, "borrowable": 8}],
        }
    ]
    assert shown["pending"] == [{"name": GPU, "requested": 32}]


def test_a_borrowing_limit_caps_what_it_could_borrow() -> None:
    s = scheduler(gpu_queue("a", quota("h100", 8, borrowing=2)), gpu_queue("b", quota("h100", 8)))
    s.run_cycle(1.0)
    qs = s.cluster_queue_status("a")
    assert qs is not None
    assert cluster_queue_quota(qs)["gpus"] == "0/8 used, +2 borrowable, 0 pending"


def test_a_queue_the_scheduler_has_not_seen_says_so() -> None:
    assert "not yet seen" in cluster_queue_quota(None)["gpus"]
