"""Block admission: while a gang starts in a flavor, nothing else is admitted into it."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st

from queuectl.core import ClusterQueue, Flavor, Scheduler
from queuectl.core.results import CycleResult
from tests.unit.core.core_helpers import admitted, gpu_queue, job, quota, reason_of

REASON = "WaitingForPodsReady"


def fleet(block: bool, *queues: ClusterQueue) -> Scheduler:
    s = Scheduler(block_admission=block)
    for f in ("h100", "a100"):
        s.upsert_flavor(Flavor(f))
    for q in queues or (gpu_queue("team", quota("h100", 16), quota("a100", 16), cohort=None),):
        s.upsert_cluster_queue(q)
    return s


def feed_admitted(s: Scheduler, result: CycleResult, *, ready: bool) -> None:
    """What the controller feeds back after writing each admission (PodsReady or not)."""
    for a in result.admitted:
        w = s.workload(a.key)
        assert w is not None
        s.upsert_workload(replace(w, admission=a.admission, starting=not ready))


def test_second_gang_waits_until_the_first_is_ready() -> None:
    """Two 8-GPU gangs fit side by side in h100; with block admission the second waits for
    the first's pods to be Ready, then goes."""
    s = fleet(True)
    s.upsert_workload(job("ns/a", "team", 1, pods=8, created=1))
    s.upsert_workload(job("ns/b", "team", 1, pods=8, created=2))
    r = s.run_cycle(10)
    assert admitted(r) == ["ns/a"]
    assert reason_of(s, "ns/b") == REASON
    info = s.pending_info("ns/b")
    assert info is not None and "ns/a" in info.message and "h100" in info.message
    feed_admitted(s, r, ready=False)  # the controller's feed agrees: still starting
    expl = s.explain("ns/b", 11)  # `queuectl describe` does not say it fits now
    assert expl.admission is None and expl.pending is not None
    assert expl.pending.reason == REASON
    assert admitted(s.run_cycle(11)) == []
    feed_admitted(s, r, ready=True)  # its pods are all Ready
    assert admitted(s.run_cycle(12)) == ["ns/b"]


def test_evicting_the_stuck_gang_frees_the_flavor() -> None:
    """The first gang never gets Ready: its startup timeout evicts it, and the second goes."""
    s = fleet(True)
    s.upsert_workload(job("ns/a", "team", 1, pods=8, created=1))
    s.upsert_workload(job("ns/b", "team", 1, pods=8, created=2))
    r = s.run_cycle(10)
    feed_admitted(s, r, ready=False)
    s.requeue_workload("ns/a", not_before=1000)  # PodsReadyTimeout, backing off
    assert admitted(s.run_cycle(20)) == ["ns/b"]


def test_other_flavors_go_on() -> None:
    """A gang starting in h100 does not hold back one that only fits a100."""
    s = fleet(True)
    s.upsert_workload(job("ns/a", "team", 1, pods=16, created=1))  # fills h100
    s.upsert_workload(job("ns/b", "team", 1, pods=8, created=2))  # goes to a100
    assert admitted(s.run_cycle(10)) == ["ns/a", "ns/b"]


def test_off_admits_both_and_ignores_starting() -> None:
    s = fleet(False)
    s.upsert_workload(job("ns/a", "team", 1, pods=8, created=1))
    s.upsert_workload(job("ns/b", "team", 1, pods=8, created=2))
    assert admitted(s.run_cycle(10)) == ["ns/a", "ns/b"]


def queues_one_careful() -> tuple[ClusterQueue, ClusterQueue]:
    careful = replace(gpu_queue("careful", quota("h100", 8), cohort="org"), block_admission=True)
    return careful, gpu_queue("other", quota("h100", 8), cohort="org")


def test_a_queue_that_turns_it_on_holds_its_flavors_while_its_gang_starts() -> None:
    """The scheduler's default is off; queue `careful` turns it on: while its gang starts,
    `other`'s gang waits for h100."""
    s = fleet(False, *queues_one_careful())
    s.upsert_workload(job("ns/a", "careful", 1, pods=8, created=1))
    s.upsert_workload(job("ns/b", "other", 1, pods=8, created=2))
    r = s.run_cycle(10)
    assert admitted(r) == ["ns/a"]
    assert reason_of(s, "ns/b") == REASON
    feed_admitted(s, r, ready=True)
    assert admitted(s.run_cycle(11)) == ["ns/b"]


def test_a_queue_that_leaves_it_off_holds_nothing() -> None:
    """`other`'s starting gang does not hold h100 (its queue leaves it off, the default)."""
    s = fleet(False, *queues_one_careful())
    s.upsert_workload(job("ns/b", "other", 1, pods=8, created=1))
    s.upsert_workload(job("ns/a", "careful", 1, pods=8, created=2))
    assert admitted(s.run_cycle(10)) == ["ns/a", "ns/b"]


def test_an_already_starting_workload_fed_on_restart_holds_its_flavor() -> None:
    """After a controller restart the feed says which admitted workloads still start."""
    s = fleet(True)
    a = job("ns/a", "team", 1, pods=8, created=1)
    s.upsert_workload(a)
    r = s.run_cycle(5)
    restarted = fleet(True)
    restarted.upsert_workload(replace(a, admission=r.admitted[0].admission, starting=True))
    restarted.upsert_workload(job("ns/b", "team", 1, pods=8, created=2))
    assert admitted(restarted.run_cycle(10)) == []
    assert reason_of(restarted, "ns/b") == REASON


def test_a_strict_fifo_queue_waits_whole() -> None:
    q = gpu_queue("team", quota("h100", 32), cohort=None, strategy="StrictFIFO")
    s = fleet(True, q)
    s.upsert_workload(job("ns/a", "team", 1, pods=8, created=1))
    s.upsert_workload(job("ns/b", "team", 1, pods=8, created=2))
    s.upsert_workload(job("ns/c", "team", 1, pods=8, created=3))
    r = s.run_cycle(10)
    assert admitted(r) == ["ns/a"]
    feed_admitted(s, r, ready=True)
    r = s.run_cycle(11)
    assert admitted(r) == ["ns/b"]
    feed_admitted(s, r, ready=True)
    assert admitted(s.run_cycle(12)) == ["ns/c"]


# --- property: at most one starting gang per flavor, at every step --------------------------

Step = tuple[str, int]


def _starting_per_flavor(s: Scheduler) -> dict[str, list[str]]:
    held: dict[str, list[str]] = {}
    for w in s.workloads().values():
        if w.admission is not None and w.starting:
            for f in {f for ps in w.admission.podsets for f in ps.flavors.values()}:
                held.setdefault(f, []).append(w.key)
    return held


def _run(block: bool, sizes: list[int], steps: list[Step]) -> list[tuple[str, ...]]:
    """Gangs of `sizes` GPUs (1-GPU pods) arrive; each step: a cycle, then ("ready", i) makes
    the i-th admitted gang Ready, ("fail", i) evicts it, ("done", i) finishes it."""
    s = fleet(block)
    for i, n in enumerate(sizes):
        s.upsert_workload(job(f"ns/w{i}", "team", 1, pods=n, created=float(i)))
    decisions: list[tuple[str, ...]] = []
    now = 10.0
    for what, i in steps:
        r = s.run_cycle(now)
        decisions.append(tuple(admitted(r)))
        feed_admitted(s, r, ready=False)
        if block:
            assert all(len(v) <= 1 for v in _starting_per_flavor(s).values())
        running = sorted(k for k, w in s.workloads().items() if w.admission is not None)
        if running:
            key = running[i % len(running)]
            w = s.workload(key)
            assert w is not None
            if what == "ready":
                s.upsert_workload(replace(w, starting=False))
            elif what == "fail":
                s.requeue_workload(key, not_before=now + 5)
            else:
                s.delete_workload(key)
        now += 1
    return decisions


@settings(max_examples=60, deadline=None)
@given(
    sizes=st.lists(st.integers(1, 16), min_size=1, max_size=8),
    steps=st.lists(
        st.tuples(st.sampled_from(["ready", "fail", "done"]), st.integers(0, 7)), max_size=12
    ),
)
def test_at_most_one_starting_gang_per_flavor(sizes: list[int], steps: list[Step]) -> None:
    _run(True, sizes, steps)


@settings(max_examples=40, deadline=None)
@given(
    sizes=st.lists(st.integers(1, 16), min_size=1, max_size=8),
    steps=st.lists(
        st.tuples(st.sampled_from(["ready", "fail", "done"]), st.integers(0, 7)), max_size=12
    ),
)
def test_off_the_starting_flag_changes_nothing(sizes: list[int], steps: list[Step]) -> None:
    """Off, feeding `starting` (as the controller always does) decides exactly as a feed
    that never sets it."""
    with_flag = _run(False, sizes, steps)
    s_plain: list[tuple[str, ...]] = []
    s = fleet(False)
    for i, n in enumerate(sizes):
        s.upsert_workload(job(f"ns/w{i}", "team", 1, pods=n, created=float(i)))
    now = 10.0
    for what, i in steps:
        r = s.run_cycle(now)
        s_plain.append(tuple(admitted(r)))
        for a in r.admitted:
            w = s.workload(a.key)
            assert w is not None
            s.upsert_workload(replace(w, admission=a.admission, starting=False))
        running = sorted(k for k, w in s.workloads().items() if w.admission is not None)
        if running:
            key = running[i % len(running)]
            w = s.workload(key)
            assert w is not None
            if what == "fail":
                s.requeue_workload(key, not_before=now + 5)
            elif what == "done":
                s.delete_workload(key)
        now += 1
    assert with_flag == s_plain
