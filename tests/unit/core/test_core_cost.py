"""Chargeback arithmetic: held intervals clipped to the report's window, each flavor priced at
its price now, groups per namespace/queue/flavor/workload, currencies never added together."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from queuectl.core.cost import Held, Price, Row, cost_of, overlap, report, totals

H = 3600.0
USD_250 = Price(2.5, "USD")


def held(
    ns: str = "team-a",
    wl: str = "train",
    flavor: str = "h100",
    gpus: float = 8,
    start: float = 0,
    end: float = H,
    cq: str = "cq-a",
) -> Held:
    return Held(ns, wl, cq, flavor, gpus, start, end)


@pytest.mark.parametrize(
    ("case", "start", "end", "since", "until", "seconds"),
    [
        ("wholly inside", 10, 20, 0, 100, 10),
        ("started before the window", -50, 20, 0, 100, 20),
        ("still running at the report", 90, 200, 0, 100, 10),
        ("spans the window", -10, 200, 0, 100, 100),
        ("ended before the window", -50, -10, 0, 100, 0),
        ("starts after the report", 150, 200, 0, 100, 0),
        ("touches the window's start only", -10, 0, 0, 100, 0),
        ("empty interval", 30, 30, 0, 100, 0),
    ],
)
def test_an_interval_counts_only_inside_the_window(
    case: str, start: float, end: float, since: float, until: float, seconds: float
) -> None:
    assert overlap(start, end, since, until) == seconds, case


@pytest.mark.parametrize(
    ("case", "gpu_seconds", "price", "cost"),
    [
        ("8 GPUs for an hour at 2.50", 8 * H, USD_250, 20.0),
        ("one GPU for 90 minutes at 2.50", 1.5 * H, USD_250, 3.75),
        ("a free flavor", 8 * H, Price(0.0, "USD"), 0.0),
        ("no price at all", 8 * H, None, 0.0),
    ],
)
def test_cost_is_gpu_hours_times_the_price(
    case: str, gpu_seconds: float, price: Price | None, cost: float
) -> None:
    assert cost_of(gpu_seconds, price) == pytest.approx(cost), case


def test_two_teams_on_two_flavors_grouped_every_way() -> None:
    """team-a: 8 H100 for 2 h and 4 A100 for 1 h; team-b: 2 H100 for 3 h (queue cq-b)."""
    intervals = [
        held("team-a", "train", "h100", 8, 0, 2 * H),
        held("team-a", "eval", "a100", 4, 0, H),
        held("team-b", "sweep", "h100", 2, 0, 3 * H, cq="cq-b"),
    ]
    prices = {"h100": USD_250, "a100": Price(1.0, "USD")}
    by_ns = report(intervals, prices, "namespace", 0, 10 * H)
    assert by_ns == [Row("team-a", 20.0, 44.0, "USD"), Row("team-b", 6.0, 15.0, "USD")]
    by_flavor = report(intervals, prices, "flavor", 0, 10 * H)
    assert by_flavor == [Row("h100", 22.0, 55.0, "USD"), Row("a100", 4.0, 4.0, "USD")]
    by_cq = report(intervals, prices, "clusterqueue", 0, 10 * H)
    assert [r.key for r in by_cq] == ["cq-a", "cq-b"]
    by_wl = report(intervals, prices, "workload", 0, 10 * H)
    assert [r.key for r in by_wl] == ["team-a/train", "team-b/sweep", "team-a/eval"]
    assert totals(by_ns) == [Row("TOTAL", 26.0, 59.0, "USD")]


def test_a_price_change_reprices_the_whole_history() -> None:
    """The rule: every hour in the window at the flavor's price at the time of the report."""
    intervals = [held(start=0, end=10 * H)]
    cheap = report(intervals, {"h100": USD_250}, "namespace", 0, 10 * H)
    dear = report(intervals, {"h100": Price(5.0, "USD")}, "namespace", 0, 10 * H)
    assert (cheap[0].cost, dear[0].cost) == (200.0, 400.0)


def test_the_window_clips_a_workload_still_running() -> None:
    """Admitted 10 h ago, still running; a 4 h report sees 4 h of it."""
    (row,) = report([held(start=-10 * H, end=0)], {"h100": USD_250}, "namespace", -4 * H, 0)
    assert row == Row("team-a", 32.0, 80.0, "USD")


def test_currencies_are_never_added_together() -> None:
    intervals = [held(flavor="h100"), held(flavor="eu-h100", gpus=4)]
    rows = report(intervals, {"h100": USD_250, "eu-h100": Price(2.0, "EUR")}, "namespace", 0, H)
    assert rows == [Row("team-a", 8.0, 20.0, "USD"), Row("team-a", 4.0, 8.0, "EUR")]
    assert totals(rows) == [Row("TOTAL", 4.0, 8.0, "EUR"), Row("TOTAL", 8.0, 20.0, "USD")]


def test_unpriced_hours_join_the_teams_only_currency_or_stand_alone() -> None:
    """A team that also used an unpriced flavor gets one line; a team with only unpriced
    flavors gets its hours and no cost."""
    intervals = [held("team-a", flavor="h100"), held("team-a", flavor="cpu-gpu", gpus=2)]
    intervals.append(held("team-b", flavor="cpu-gpu", gpus=1))
    rows = report(intervals, {"h100": USD_250}, "namespace", 0, H)
    assert rows == [Row("team-a", 10.0, 20.0, "USD"), Row("team-b", 1.0, 0.0, "")]


def test_nothing_in_the_window_gives_no_rows() -> None:
    assert report([held(start=0, end=H)], {"h100": USD_250}, "namespace", 2 * H, 3 * H) == []


@given(
    st.lists(
        st.tuples(
            st.sampled_from(["a", "b", "c"]),
            st.floats(0, 16),
            st.floats(-100 * H, 100 * H),
            st.floats(0, 50 * H),
        ),
        max_size=12,
    ),
    st.floats(-50 * H, 50 * H),
    st.floats(1, 50 * H),
)
def test_every_grouping_adds_up_to_the_same_total(
    spans: list[tuple[str, float, float, float]], since: float, length: float
) -> None:
    intervals = [held(ns, f"w{i}", "h100", g, s, s + d) for i, (ns, g, s, d) in enumerate(spans)]
    prices = {"h100": USD_250}
    sums = {
        by: sum(r.gpu_hours for r in report(intervals, prices, by, since, since + length))
        for by in ("namespace", "clusterqueue", "flavor", "workload")
    }
    assert max(sums.values()) == pytest.approx(min(sums.values()), rel=1e-9, abs=1e-9)
    assert all(v >= 0 for v in sums.values())
