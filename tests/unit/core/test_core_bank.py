"""GPU time banking: the books (accrual, spending, decay, cap) and the two decisions credit
changes (who borrows first, who is reclaimed first)."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given
from hypothesis import strategies as hs

from queuectl.core import ClusterQueue, GpuTimeBank, PreemptionPolicy
from queuectl.core.bank import Ledger, accrue
from queuectl.core.quota import QNode
from queuectl.core.types import GPU
from tests.unit.core.core_helpers import admitted, gpu_queue, job, quota, scheduler

HOUR = 3600.0
BANK = GpuTimeBank(cap_gpu_hours=10.0)


@pytest.mark.parametrize(
    ("start", "bank", "idle", "borrowed", "hours", "expected"),
    [
        pytest.param(0.0, BANK, 4, 0, 2.0, 8.0, id="4 idle GPUs for 2 h earn 8 GPU-hours"),
        pytest.param(0.0, BANK, 4, 0, 5.0, 10.0, id="never beyond the cap"),
        pytest.param(8.0, BANK, 0, 4, 1.0, 4.0, id="borrowing 4 GPUs for 1 h spends 4"),
        pytest.param(2.0, BANK, 0, 4, 1.0, 0.0, id="spending stops at zero"),
        pytest.param(0.0, BANK, 0, 8, 1.0, 0.0, id="a team that always borrows has none"),
        pytest.param(
            0.0, replace(BANK, accrual_rate=0.5), 4, 0, 2.0, 4.0, id="half the accrual rate"
        ),
        pytest.param(
            8.0, replace(BANK, half_life_hours=1.0), 0, 0, 1.0, 4.0, id="an idle half-life halves"
        ),
        pytest.param(12.0, BANK, 0, 0, 0.0, 10.0, id="a lowered cap clamps at once"),
        pytest.param(3.0, BANK, 2, 2, 1.0, 3.0, id="idle in one flavor, borrowed in another"),
    ],
)
def test_the_books(
    start: float, bank: GpuTimeBank, idle: int, borrowed: int, hours: float, expected: float
) -> None:
    assert accrue(start, bank, idle, borrowed, hours * HOUR) == pytest.approx(expected)


def test_decay_and_accrual_meet_at_their_fixed_point() -> None:
    """Accrual 4 GPU-h/h against a 1 h half-life settles at 4 / ln 2 GPU-hours."""
    bank = GpuTimeBank(cap_gpu_hours=100.0, half_life_hours=1.0)
    assert accrue(0.0, bank, 4, 0, 48 * HOUR) == pytest.approx(4 / 0.6931471805599453)


banks = hs.builds(
    GpuTimeBank,
    cap_gpu_hours=hs.floats(0.0, 1e4),
    accrual_rate=hs.floats(0.0, 8.0),
    half_life_hours=hs.none() | hs.floats(0.01, 1e3),
)
flows = hs.tuples(hs.integers(0, 512), hs.integers(0, 512), hs.floats(0.0, 30 * 86400.0))


@given(hs.floats(-1e4, 1e5), banks, hs.lists(flows, max_size=20))
def test_a_balance_stays_within_zero_and_the_cap(
    start: float, bank: GpuTimeBank, steps: list[tuple[int, int, float]]
) -> None:
    b = start
    for idle, borrowed, seconds in steps:
        b = accrue(b, bank, idle, borrowed, seconds)
        assert 0.0 <= b <= bank.cap_gpu_hours


@given(hs.floats(0.0, 1e3), banks, flows, hs.floats(0.0, 1.0))
def test_two_intervals_keep_the_books_of_one(
    start: float, bank: GpuTimeBank, flow: tuple[int, int, float], cut: float
) -> None:
    """The books do not depend on how often cycles run: splitting an interval changes nothing
    (so the simulator's event-driven cycles and the controller's keep the same balance)."""
    idle, borrowed, seconds = flow
    whole = accrue(start, bank, idle, borrowed, seconds)
    first = accrue(start, bank, idle, borrowed, seconds * cut)
    both = accrue(first, bank, idle, borrowed, seconds - seconds * cut)
    assert both == pytest.approx(whole, rel=1e-6, abs=1e-6)


@given(banks, hs.lists(flows, max_size=10))
def test_a_ledger_is_deterministic(bank: GpuTimeBank, steps: list[tuple[int, int, float]]) -> None:
    def run() -> float | None:
        ledger = Ledger()
        ledger.configure({"q": ClusterQueue("q", gpu_time_bank=bank)})
        now = 0.0
        for idle, borrowed, seconds in steps:
            node = QNode("q", is_queue=True)
            node.nominal = {("h100", GPU): idle}
            node.subtree = dict(node.nominal)
            node.usage = {("h100", GPU): borrowed} if borrowed else {}
            ledger.settle(now, {"q": node})
            now += seconds
        return ledger.balance("q", now)

    assert run() == run()


def saver_and_borrower(bank: GpuTimeBank | None) -> tuple[ClusterQueue, ClusterQueue]:
    saver = replace(gpu_queue("saver", quota("h100", 4)), gpu_time_bank=bank)
    borrower = gpu_queue("borrower", quota("h100", 4))
    return saver, borrower


@pytest.mark.parametrize(
    ("bank", "first"),
    [
        pytest.param(None, "borrower/1", id="without banking the older head borrows first"),
        pytest.param(BANK, "saver/1", id="the saver's credit lets it borrow first"),
    ],
)
def test_credit_orders_borrowing(bank: GpuTimeBank | None, first: str) -> None:
    """The saver leaves its 4 GPUs idle for 2 hours while the borrower runs; then both want
    the lender's 4 idle GPUs: the saver 8 GPUs (4 its own), the borrower 4 more."""
    saver, borrower = saver_and_borrower(bank)
    s = scheduler(gpu_queue("lender", quota("h100", 4)), saver, borrower)
    s.upsert_workload(job("borrower/0", "borrower", 4))
    s.run_cycle(0.0)
    s.upsert_workload(job("borrower/1", "borrower", 4, created=100))
    s.upsert_workload(job("saver/1", "saver", 8, created=200))
    assert admitted(s.run_cycle(2 * HOUR)) == [first]


def test_the_balance_counts_while_borrowing_and_stops_at_zero() -> None:
    saver, _ = saver_and_borrower(BANK)
    s = scheduler(gpu_queue("lender", quota("h100", 4)), saver)
    s.run_cycle(0.0)
    assert s.gpu_time_bank("saver", 2 * HOUR) == pytest.approx(8.0)
    s.upsert_workload(job("saver/1", "saver", 8))
    assert admitted(s.run_cycle(2 * HOUR)) == ["saver/1"]
    assert s.gpu_time_bank("saver", 3 * HOUR) == pytest.approx(4.0)
    assert s.gpu_time_bank("saver", 5 * HOUR) == 0.0
    assert s.gpu_time_bank("lender", 5 * HOUR) is None


@pytest.mark.parametrize(
    ("bank", "victim"),
    [
        pytest.param(None, "x/0", id="without banking the largest share is reclaimed first"),
        pytest.param(BANK, "y/0", id="the borrower without credit is reclaimed first"),
    ],
)
def test_credit_orders_reclaim(bank: GpuTimeBank | None, victim: str) -> None:
    """x saved for an hour, then borrows 3 GPUs; y borrows 2; the lender takes back 4."""
    lender = gpu_queue("lender", quota("h100", 6), preemption=PreemptionPolicy("Never", "Any"))
    x = replace(gpu_queue("x", quota("h100", 2)), gpu_time_bank=bank)
    s = scheduler(lender, x, gpu_queue("y", quota("h100", 2)))
    s.run_cycle(0.0)
    s.upsert_workload(job("x/0", "x", 5))
    s.upsert_workload(job("y/0", "y", 4))
    assert admitted(s.run_cycle(HOUR)) == ["x/0", "y/0"]
    s.upsert_workload(job("lender/0", "lender", 4))
    result = s.run_cycle(HOUR + 60)
    assert [p.victim for p in result.preemptions] == [victim]


def test_a_restored_balance_counts_from_the_first_cycle_and_a_removed_bank_forgets_it() -> None:
    saver, _ = saver_and_borrower(BANK)
    s = scheduler(saver)
    s.restore_gpu_time_bank("saver", 3.0)
    s.restore_gpu_time_bank("nobody", 3.0)  # no such queue: nothing to keep
    s.run_cycle(10 * HOUR)  # the time before the first cycle earns nothing
    assert s.gpu_time_bank("saver", 10 * HOUR) == pytest.approx(3.0)
    assert s.gpu_time_bank("saver", 11 * HOUR) == pytest.approx(7.0)
    assert s.gpu_time_bank("nobody", 11 * HOUR) is None
    s.upsert_cluster_queue(replace(saver, gpu_time_bank=None))
    assert s.gpu_time_bank("saver", 11 * HOUR) is None
    s.upsert_cluster_queue(saver)
    assert s.gpu_time_bank("saver", 11 * HOUR) == 0.0


@pytest.mark.parametrize(
    ("bank", "preempts"),
    [
        pytest.param(None, [], id="without credit a borrower waits for borrowed GPUs to free"),
        pytest.param(BANK, ["borrower/1"], id="credit takes borrowed GPUs from a queue without"),
    ],
)
def test_credit_lets_a_burst_take_borrowed_gpus_from_a_queue_without_credit(
    bank: GpuTimeBank | None, preempts: list[str]
) -> None:
    """The borrower took the lender's 4 idle GPUs at equal priority; the saver, after 2 idle
    hours, bursts to 8 GPUs (4 beyond its quota). Only borrowed work is ever taken: the
    borrower's own 4 GPUs stay."""
    saver, borrower = saver_and_borrower(bank)
    saver = replace(saver, preemption=PreemptionPolicy("Never", "Any"))
    s = scheduler(gpu_queue("lender", quota("h100", 4)), saver, borrower)
    s.upsert_workload(job("borrower/0", "borrower", 4))
    s.upsert_workload(job("borrower/1", "borrower", 4, created=1))
    s.run_cycle(0.0)
    s.upsert_workload(job("saver/1", "saver", 8, created=200))
    result = s.run_cycle(2 * HOUR)
    assert [p.victim for p in result.preemptions] == preempts
    assert all(p.reason == "InCohortReclaimWithCredit" for p in result.preemptions)


def test_a_burst_parked_without_credit_takes_borrowed_gpus_once_its_credit_comes_in() -> None:
    """The saver bursts to 8 GPUs while the borrower holds the lender's 4: without credit it
    has no candidates and its job is parked. Nothing happens for 2 hours but its 4 GPUs lying
    idle; the next cycle sees the credit they earned and takes the borrowed GPUs, as a fresh
    evaluation would, though no quota was freed to wake the parked job."""
    saver, borrower = saver_and_borrower(BANK)
    saver = replace(saver, preemption=PreemptionPolicy("Never", "Any"))
    s = scheduler(gpu_queue("lender", quota("h100", 4)), saver, borrower)
    s.upsert_workload(job("borrower/0", "borrower", 4))
    s.upsert_workload(job("borrower/1", "borrower", 4, created=1))
    s.upsert_workload(job("saver/1", "saver", 8, created=2))
    first = s.run_cycle(0.0)
    assert admitted(first) == ["borrower/0", "borrower/1"]
    assert not first.preemptions
    result = s.run_cycle(2 * HOUR)
    assert [p.victim for p in result.preemptions] == ["borrower/1"]
    assert all(p.reason == "InCohortReclaimWithCredit" for p in result.preemptions)


def test_a_borrower_whose_credit_runs_out_is_reclaimed_then_without_another_event() -> None:
    """After an idle hour both banked queues have 4 GPU-hours. The rich one bursts to 8 GPUs,
    4 borrowed, spending 4 GPU-hours an hour; the saver's burst right after has no candidate
    (credit never takes from a queue with credit) and is parked. The cycle asks to be woken
    when the rich queue's credit runs out, an hour later; then its borrowed job is the saver's
    victim."""
    rich = replace(gpu_queue("rich", quota("h100", 4)), gpu_time_bank=BANK)
    saver = replace(
        gpu_queue("saver", quota("h100", 4), preemption=PreemptionPolicy("Never", "Any")),
        gpu_time_bank=BANK,
    )
    s = scheduler(gpu_queue("lender", quota("h100", 4)), rich, saver)
    s.run_cycle(0.0)
    s.upsert_workload(job("rich/0", "rich", 8, created=HOUR))
    s.upsert_workload(job("saver/1", "saver", 8, created=HOUR + 1))
    result = s.run_cycle(HOUR)
    assert admitted(result) == ["rich/0"]
    assert not result.preemptions
    assert result.next_wakeup == pytest.approx(2 * HOUR + 1.0)
    assert s.gpu_time_bank("rich", 2 * HOUR + 1.0) == 0.0
    woken = s.run_cycle(2 * HOUR + 1.0)
    assert [p.victim for p in woken.preemptions] == ["rich/0"]


@pytest.mark.parametrize(
    ("bank", "idle", "borrowed", "runs_out_h"),
    [
        pytest.param(BANK, 0, 4, 1.0, id="4 GPU-hours spent at 4 an hour"),
        pytest.param(BANK, 4, 2, None, id="earning more than it spends: never"),
        pytest.param(BANK, 0, 0, None, id="neither earning nor spending: never"),
        pytest.param(replace(BANK, half_life_hours=1.0), 0, 4, 0.76, id="decay hastens the end"),
        pytest.param(replace(BANK, half_life_hours=1.0), 0, 0, None, id="decay alone only halves"),
    ],
)
def test_when_credit_runs_out(
    bank: GpuTimeBank, idle: int, borrowed: int, runs_out_h: float | None
) -> None:
    """A balance of 4 GPU-hours under steady flows."""
    ledger = Ledger()
    ledger.configure({"q": replace(gpu_queue("q", quota("h100", 4)), gpu_time_bank=bank)})
    ledger.restore("q", 4.0)
    ledger.at, ledger.flows["q"] = 0.0, (idle, borrowed)
    end = ledger.turns("q")
    if runs_out_h is None:
        assert end is None
        return
    assert end == pytest.approx(runs_out_h * HOUR + 1.0, abs=5.0)
    assert ledger.balance("q", end) == 0.0
    assert ledger.balance("q", end - 2.0) > 0.0


@pytest.mark.parametrize(
    ("idle", "borrowed", "turns"),
    [
        pytest.param(2, 0, 1.0, id="earning from zero: credit a second later"),
        pytest.param(2, 2, None, id="spending as much as it earns: never"),
        pytest.param(0, 0, None, id="neither: never"),
    ],
)
def test_when_credit_comes_in(idle: int, borrowed: int, turns: float | None) -> None:
    ledger = Ledger()
    ledger.configure({"q": replace(gpu_queue("q", quota("h100", 4)), gpu_time_bank=BANK)})
    ledger.at, ledger.flows["q"] = 0.0, (idle, borrowed)
    assert ledger.turns("q") == turns
    if turns is not None:
        assert ledger.balance("q", turns) > 0.0


def test_a_burst_that_waits_as_its_queue_turns_idle_gets_credit_without_another_event() -> None:
    """The saver's only job ends while its burst (8 GPUs, 4 borrowed) is parked behind the
    borrower's borrowed job: from then on its 4 GPUs lie idle and earn credit, and the cycle
    asks to be woken a second later, when the credit lets the burst take the borrowed GPUs
    (without patience: here it would wait a few seconds for more finishes like the saver's)."""
    saver, borrower = saver_and_borrower(BANK)
    saver = replace(saver, preemption=PreemptionPolicy("Never", "Any"))
    s = scheduler(gpu_queue("lender", quota("h100", 4)), saver, borrower, patience=0.0)
    s.upsert_workload(job("saver/0", "saver", 4))
    s.upsert_workload(job("borrower/0", "borrower", 4, created=1))
    s.upsert_workload(job("borrower/1", "borrower", 4, created=2))
    assert admitted(s.run_cycle(0.0)) == ["borrower/0", "borrower/1", "saver/0"]
    s.upsert_workload(job("saver/1", "saver", 8, created=3))
    s.delete_workload("saver/0")
    result = s.run_cycle(HOUR)
    assert not result.preemptions, "no credit yet: the saver was busy for the hour"
    assert result.next_wakeup == pytest.approx(HOUR + 1.0)
    woken = s.run_cycle(HOUR + 1.0)
    assert [p.victim for p in woken.preemptions] == ["borrower/1"]
