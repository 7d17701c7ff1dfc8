"""The ideal pooled scheduler: what a scenario's arrivals alone make work wait."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from bench.cluster import cli, ideal, ratios
from bench.cluster.scenario import Scenario, load, parse


def one_queue(*streams: dict[str, Any], nominal: int = 2, borrowing: int = 0) -> Scenario:
    return parse(
        {
            "name": "tiny",
            "cohorts": 1,
            "queuesPerCohort": 1,
            "queue": {"nominalQuota": nominal, "borrowingLimit": borrowing},
            "streams": list(streams),
        }
    )


def stream(cls: str, **kw: Any) -> dict[str, Any]:
    base = {"class": cls, "count": 1, "units": 2, "runtimeMs": 1000, "priority": 0}
    return base | {"intervalMs": 0} | kw


@pytest.mark.parametrize(
    ("streams", "hold", "expected"),
    [
        # three 2-unit jobs at once on a 2-unit queue: they run one after another
        ((stream("big", count=3),), 0.0, {"big": 1.0}),
        # each admission holds its quota half a second past its runtime
        ((stream("big", count=3),), 0.5, {"big": 1.5}),
        # one arrives each second, each runs a second: nobody waits
        ((stream("big", count=3, intervalMs=1000),), 0.0, {"big": 0.0}),
        # the higher priority goes first though both arrive together
        (
            (stream("low", priority=1), stream("high", priority=9)),
            0.0,
            {"high": 0.0, "low": 1.0},
        ),
    ],
)
def test_one_queue_by_hand(
    streams: tuple[dict[str, Any], ...], hold: float, expected: dict[str, float]
) -> None:
    assert ideal.times_to_admission(one_queue(*streams), hold) == expected


def test_a_small_job_starts_while_a_bigger_one_waits_for_room() -> None:
    scenario = one_queue(
        stream("first", units=2),
        stream("big", units=3, priority=5, intervalMs=0),
        stream("small", units=1, priority=1),
        nominal=3,
    )
    # `first` and `big` arrive together; big (priority 5) goes first and takes all 3 units;
    # at 1 s `first` (2 units) and `small` (1 unit) both fit in what big gives back
    assert ideal.times_to_admission(scenario) == {"big": 0.0, "first": 1.0, "small": 1.0}


def test_tas_makes_large_work_wait_15_s_even_on_an_instant_scheduler() -> None:
    """Three large streams per ClusterQueue where baseline has one: the same cohort quota
    (six 20-unit jobs at once) meets three times the arrivals, so the queue builds for 20 s
    before it drains, whoever schedules it."""
    baseline = ideal.times_to_admission(load("baseline"))
    tas = ideal.times_to_admission(load("tas"))
    assert baseline["large"] < 0.5
    assert tas["large"] == pytest.approx(15.09, abs=0.01)


def test_the_hold_that_made_a_measurement_is_found_again() -> None:
    scenario = load("baseline")
    measured = ideal.times_to_admission(scenario, 0.7)
    assert ideal.fit_hold(scenario, measured)["large"] == pytest.approx(0.7)


def test_with_the_same_hold_in_both_runs_tas_large_waits_over_twice_the_baseline() -> None:
    """Fitted to a baseline whose large class waited 13 s (hold ~0.74 s), the model's tas
    large class waits 2.5 times as long: the ratio the arrivals alone explain."""
    measured = {"small": 128.066, "medium": 62.042, "large": 13.054}
    expected = ideal.expected_ratios(load("tas"), load("baseline"), measured)
    assert expected["large"]["ratio"] > 2
    assert expected["large"]["floor_s"] == pytest.approx(15.09, abs=0.01)
    assert set(expected) == {"small", "medium", "large"}


def test_a_job_bigger_than_its_queue_can_ever_hold_is_named() -> None:
    scenario = one_queue(stream("huge", units=5), nominal=2, borrowing=1)
    with pytest.raises(ValueError, match=r"stream huge asks for 5 units.*hold \(2\)"):
        ideal.times_to_admission(scenario)


def test_a_negative_hold_is_refused() -> None:
    with pytest.raises(ValueError, match="hold_extra_s must be >= 0"):
        ideal.times_to_admission(one_queue(stream("a")), -1.0)


def test_the_tas_report_shows_what_the_arrivals_alone_explain(tmp_path: Path) -> None:
    path = tmp_path / "baseline-20261127T110000Z.json"
    path.write_text(
        json.dumps(
            {
                "scenario": "baseline",
                "started_at": "20261127T110000Z",
                "all_finished": True,
                "wall_s": 200.0,
                "tta_avg_s": {"small": 128.066, "medium": 62.042, "large": 13.054},
            }
        )
    )
    res: dict[str, Any] = {
        "scenario": "tas",
        "wall_s": 220.0,
        "tta_avg_s": {"small": 130.0, "medium": 70.0, "large": 31.0},
    }
    cli._compare(res, load("tas"), SimpleNamespace(against=path, out=tmp_path))  # type: ignore[arg-type]
    arrivals = res["ratios"]["arrivals"]
    assert arrivals["large"]["ratio"] > 2
    text = "\n".join(ratios.markdown(res["ratios"]))
    assert "What the arrivals alone explain" in text
    assert f"| large | {arrivals['large']['hold_extra_s']} s |" in text
