"""Pending queues keep one shape object per bucket, however many workloads share it."""

from __future__ import annotations

from core_helpers import job

from queuectl.core.queues import PendingQueue


def test_workloads_of_one_shape_share_their_bucket_shape() -> None:
    q = PendingQueue()
    for i in range(3):
        q.add(job(f"ns/w{i}", "cq", 2, priority=i))
    q.add(job("ns/other", "cq", 4))
    (two, four) = sorted(q.buckets.values(), key=lambda b: len(q.members(b)), reverse=True)
    assert len(q.members(two)) == 3
    assert all(q.entries[k][1] is two.shape for k in q.members(two))
    assert q.entries["ns/other"][1] is four.shape
    q.remove("ns/w0")
    q.add(job("ns/w0", "cq", 2))
    assert q.entries["ns/w0"][1] is two.shape
