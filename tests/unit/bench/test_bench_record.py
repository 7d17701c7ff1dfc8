"""What the runner makes of its observations: evicted work and the two times to admission."""

from __future__ import annotations

import pytest

from bench.cluster.record import Recorder, parse_time


def recorder(*items: tuple[str, str, int]) -> Recorder:
    rec = Recorder(nominal_total=40)
    for name, cls, units in items:
        rec.add(name, cls, units)
        rec.created(name, 0.0)
    return rec


def test_an_eviction_throws_away_the_units_times_the_seconds_since_admission() -> None:
    rec = recorder(("medium", "medium", 5), ("large", "large", 20))
    rec.admitted("medium", 10.0)
    rec.stopped("medium", 13.0, finished=False)  # 3 s x 5 units lost
    rec.admitted("large", 11.0)
    rec.stopped("large", 11.5, finished=False)  # 0.5 s x 20 units lost
    assert rec.evicted_unit_s == pytest.approx(25.0)

    rec.admitted("medium", 20.0)  # readmitted: runs its whole runtime again
    rec.stopped("medium", 25.0, finished=True)  # finished work is not thrown away
    assert rec.evicted_unit_s == pytest.approx(25.0)
    assert rec.counts()["evictions"] == 2
    assert rec.counts()["admissions"] == 3


def test_a_pending_workload_that_is_evicted_again_loses_nothing_more() -> None:
    rec = recorder(("small", "small", 1))
    rec.admitted("small", 1.0)
    rec.stopped("small", 2.0, finished=False)
    rec.stopped("small", 3.0, finished=False)  # a later event of the same eviction
    assert rec.evicted_unit_s == pytest.approx(1.0)
    assert rec.counts()["evictions"] == 1


def test_time_to_admission_as_the_reference_defines_it_counts_the_last_admission() -> None:
    """Runner: first seen Admitted - create sent. Reference: Admitted's lastTransitionTime -
    creationTimestamp, which an eviction and readmission move to the last admission."""
    rec = recorder(("a", "small", 1), ("b", "small", 1), ("c", "large", 20))
    rec.admitted("a", 2.0)
    rec.api_admission("a", created_at=1000.0, admitted_at=1002.0)
    rec.stopped("a", 3.0, finished=False)
    rec.admitted("a", 30.0)
    rec.api_admission("a", created_at=1000.0, admitted_at=1030.0)
    rec.admitted("b", 4.0)
    rec.api_admission("b", created_at=1000.0, admitted_at=1004.0)
    rec.admitted("c", 1.0)
    rec.api_admission("c", created_at=1001.0, admitted_at=1002.0)

    assert rec.tta()["small"]["avg"] == pytest.approx(3.0)  # (2 + 4) / 2: first admissions
    reference = rec.tta_reference()
    assert reference["small"]["avg"] == pytest.approx(17.0)  # (30 + 4) / 2: last admissions
    assert reference["small"]["max"] == pytest.approx(30.0)
    assert reference["large"]["avg"] == pytest.approx(1.0)


def test_a_workload_never_seen_admitted_has_no_reference_time() -> None:
    rec = recorder(("a", "small", 1))
    rec.api_admission("a", created_at=1000.0, admitted_at=None)
    assert rec.tta_reference() == {}


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("2026-11-25T00:00:01Z", 1795564801.0),
        ("2026-11-25T00:00:01.250000Z", 1795564801.25),
        ("2026-11-25T00:00:01+00:00", 1795564801.0),
        (None, None),
        ("", None),
    ],
)
def test_api_times_parse_with_whole_or_fractional_seconds(
    value: str | None, expected: float | None
) -> None:
    assert parse_time(value) == expected
