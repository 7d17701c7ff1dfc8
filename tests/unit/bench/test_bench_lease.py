"""The controller's Lease as the runner watches it: the longest gap between renewals, and loss."""

from __future__ import annotations

from typing import Any

import pytest

from bench.cluster.lease import LeaseLog

T0 = "2026-11-25T00:00:00"
EPOCH0 = 1795564800.0


def spec(renew_s: float, holder: str | None = "ctl-a", transitions: int = 0) -> dict[str, Any]:
    """A Lease spec renewed `renew_s` seconds after T0 (the controller writes microseconds)."""
    whole, frac = divmod(renew_s, 1)
    return {
        "holderIdentity": holder,
        "leaseDurationSeconds": 15,
        "renewTime": f"{T0[:-2]}{int(whole):02d}.{round(frac * 1e6):06d}Z",
        "leaseTransitions": transitions,
    }


def watched(*specs: dict[str, Any]) -> LeaseLog:
    log = LeaseLog()
    for s in specs:
        log.observe(s)
    return log


def test_steady_renewals_give_their_period_and_keep_the_lease() -> None:
    log = watched(spec(0), spec(2.0), spec(4.1), spec(6.1))
    held = log.summary()
    assert held["max_gap_s"] == pytest.approx(2.1)
    assert held["renewals"] == 4
    assert held["lost"] is False and held["holder_changed"] is False


def test_a_version_seen_twice_is_one_renewal() -> None:
    """A relist after a dropped watch shows the same renewTime again."""
    log = watched(spec(0), spec(2.0), spec(2.0), spec(4.0))
    assert log.summary()["renewals"] == 3


def test_the_time_since_the_last_renewal_counts_until_the_load_ends() -> None:
    log = watched(spec(0), spec(2.0))
    assert log.max_gap(until=EPOCH0 + 9.5) == pytest.approx(7.5)
    assert log.max_gap() == pytest.approx(2.0)


@pytest.mark.parametrize(
    ("versions", "why"),
    [
        ([spec(0), spec(2, holder="ctl-b", transitions=1)], "holder changed"),
        ([spec(0), spec(2, holder=None)], "holder cleared"),
        ([spec(0), spec(2, transitions=1)], "transitions moved"),
        ([spec(0), spec(16.0)], "a gap longer than the lease: anyone could have taken it"),
    ],
)
def test_the_lease_counts_as_lost(versions: list[dict[str, Any]], why: str) -> None:
    assert watched(*versions).summary()["lost"] is True, why


def test_a_deleted_lease_is_lost() -> None:
    log = watched(spec(0))
    log.deleted = True
    assert log.summary()["lost"] is True


def test_fewer_than_two_renewals_give_no_gap() -> None:
    assert watched().summary()["max_gap_s"] is None
    assert watched(spec(0)).max_gap() is None
