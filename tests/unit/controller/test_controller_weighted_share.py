"""A ClusterQueue's status.fairSharing.weightedShare is per mille in an int64: a weight-0 queue
that borrows (infinite share) is written as the largest int64, as Kueue does, instead of
failing the status write."""

from __future__ import annotations

import pytest

from queuectl.controller.queues.queues import INT64_MAX, per_mille


@pytest.mark.parametrize(
    ("share", "written"),
    [(0.0, 0), (0.25, 250), (1 / 3, 333), (float("inf"), INT64_MAX), (1e300, INT64_MAX)],
)
def test_a_weighted_share_is_written_per_mille(share: float, written: int) -> None:
    assert per_mille(share) == written
