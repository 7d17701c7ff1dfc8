"""Health scenarios on a scripted 8-GPU node: a pass every 10 s, faults on cue, hysteresis."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from queuectl.agent import health
from queuectl.agent.discovery import Inventory, read_inventory
from queuectl.agent.health import GpuState, HealthPolicy, Observation, summarize
from queuectl.agent.observe import observe
from queuectl.agent.reader import GpuSample
from queuectl.agent.scripted import ManualClock, ScriptedReader
from queuectl.api import names

PASS_S = 10.0
POLICY = HealthPolicy(max_temperature_c=90, recovery_passes=3, hold_down_s=60)


class Node:
    """A scripted node and the health state machine, advanced one pass at a time."""

    def __init__(self, policy: HealthPolicy = POLICY, count: int = 8) -> None:
        self.clock = ManualClock()
        self.t0 = self.clock.now
        self.reader = ScriptedReader.node("H100", count, "nvswitch", clock=self.clock)
        self.inventory: Inventory = read_inventory(self.reader)
        self.policy = policy
        self.state: dict[str, GpuState] = {}

    def at(self, seconds: float) -> float:
        return self.t0 + seconds

    def passes(self, n: int = 1) -> health.NodeHealth:
        for _ in range(n):
            self.clock.advance(PASS_S)
            obs = observe(self.reader, self.inventory, self.clock.now)
            self.state = health.step(self.policy, self.state, obs)
        return summarize(self.state)

    def gpu(self, index: int) -> GpuState:
        return next(g for g in self.state.values() if g.index == index)


def test_a_fresh_node_is_healthy() -> None:
    node = Node()
    report = node.passes()
    assert (report.healthy, report.healthy_count, report.total) == (True, 8, 8)
    assert report.reason == names.REASON_GPU_ALL_HEALTHY
    assert report.message == "8/8 GPUs healthy"


def test_xid_79_makes_the_gpu_unhealthy() -> None:
    node = Node()
    node.reader.xid(node.at(15), gpu=3, xid=79)
    assert node.passes().healthy
    report = node.passes()
    assert (report.healthy, report.healthy_count) == (False, 7)
    assert report.reason == names.REASON_GPU_XID
    assert "GPU 3" in report.message and "XID 79 (GPU has fallen off the bus)" in report.message
    assert node.gpu(3).last_xid == 79


@pytest.mark.parametrize("xid", sorted(health.APPLICATION_XIDS))
def test_application_xids_are_ignored(xid: int) -> None:
    node = Node()
    node.reader.xid(node.at(5), gpu=0, xid=xid)
    report = node.passes()
    assert report.healthy
    assert node.gpu(0).last_xid == xid  # still visible in metrics


def test_the_ignore_list_is_configurable() -> None:
    node = Node(HealthPolicy(ignored_xids=frozenset({79})))
    node.reader.xid(node.at(5), gpu=0, xid=79)
    node.reader.xid(node.at(5), gpu=1, xid=13)
    report = node.passes()
    assert [g.index for g in report.unhealthy] == [1]


def test_a_double_bit_ecc_error_makes_the_gpu_unhealthy() -> None:
    node = Node()
    node.reader.dbe(node.at(5), gpu=6)
    report = node.passes()
    assert report.reason == names.REASON_GPU_DOUBLE_BIT_ECC
    assert [g.index for g in report.unhealthy] == [6]


def test_a_rising_dbe_count_alone_is_enough() -> None:
    policy = POLICY
    before = GpuState(index=0, uuid="GPU-a", last_dbe=2)
    after = health.step_gpu(
        policy, before, 100.0, GpuSample(0, "GPU-a", ecc_dbe_volatile=3), None, []
    )
    assert not after.healthy and after.reason == names.REASON_GPU_DOUBLE_BIT_ECC
    assert "from 2 to 3" in after.message


def test_dbe_seen_before_the_agent_started_is_a_baseline_not_a_fault() -> None:
    first = health.step_gpu(
        POLICY, GpuState(0, "GPU-a"), 0.0, GpuSample(0, "GPU-a", ecc_dbe_volatile=5), None, []
    )
    assert first.healthy and first.last_dbe == 5


@pytest.mark.parametrize(
    ("sample", "reason"),
    [
        (GpuSample(0, "GPU-a", retired_pages_pending=True), names.REASON_GPU_RETIRED_PAGES_PENDING),
        (GpuSample(0, "GPU-a", row_remap_pending=True), names.REASON_GPU_ROW_REMAP_PENDING),
        (GpuSample(0, "GPU-a", row_remap_failure=True), names.REASON_GPU_ROW_REMAP_FAILURE),
        (GpuSample(0, "GPU-a", temperature_c=95), names.REASON_GPU_OVERHEATED),
        (GpuSample(0, "GPU-a", temperature_c=90), names.REASON_GPU_OVERHEATED),
    ],
)
def test_sampled_faults(sample: GpuSample, reason: str) -> None:
    state = health.step_gpu(POLICY, GpuState(0, "GPU-a"), 0.0, sample, None, [])
    assert (state.healthy, state.reason) == (False, reason)


def test_unsupported_queries_are_not_faults() -> None:
    state = health.step_gpu(POLICY, GpuState(0, "GPU-a"), 0.0, GpuSample(0, "GPU-a"), None, [])
    assert state.healthy


def test_a_temperature_spike_recovers_only_after_the_hold_down() -> None:
    node = Node()
    node.reader.temperature(node.at(5), gpu=2, celsius=97)
    node.reader.temperature(node.at(25), gpu=2, celsius=60)
    assert node.passes(2).reason == names.REASON_GPU_OVERHEATED  # t=10, 20: hot
    # Last fault at t=20; clean from t=30. Three clean passes by t=50, but the hold-down
    # (60 s since the last fault) lasts until t=80.
    assert not node.passes(3).healthy  # t=50
    assert not node.passes(2).healthy  # t=70
    assert node.passes(1).healthy  # t=80
    assert node.gpu(2).reason is None


def test_recovery_needs_consecutive_clean_passes() -> None:
    node = Node(HealthPolicy(recovery_passes=4, hold_down_s=0))
    node.reader.xid(node.at(5), gpu=1, xid=79)
    node.reader.xid(node.at(35), gpu=1, xid=79)  # a second one resets the count
    assert not node.passes(3).healthy  # t=10 fault, t=20, t=30 clean
    assert not node.passes(4).healthy  # t=40 fault again, then 3 clean
    assert node.passes(1).healthy  # 4th clean pass


def test_pending_retired_pages_keep_the_gpu_unhealthy_until_reset() -> None:
    node = Node()
    node.reader.pending_pages(node.at(5), gpu=4)
    assert not node.passes(20).healthy
    node.reader.pending_pages(node.clock.now + 1, gpu=4, pending=False)
    assert not node.passes(5).healthy
    assert node.passes(2).healthy


def test_a_gpu_that_stops_answering_is_unhealthy_and_comes_back() -> None:
    node = Node()
    node.reader.stop_answering(node.at(5), gpu=7)
    node.reader.answer_again(node.at(25), gpu=7)
    report = node.passes()
    assert report.reason == names.REASON_GPU_NOT_ANSWERING
    assert "GPU 7" in report.message
    assert not node.passes(6).healthy  # t=70: last fault at t=20, hold-down to t=80
    assert node.passes(1).healthy


def test_a_gpu_that_disappears_is_reported_missing() -> None:
    state = {"GPU-a": GpuState(0, "GPU-a"), "GPU-b": GpuState(1, "GPU-b")}
    obs = Observation(10.0, [(0, "GPU-a")], {"GPU-a": GpuSample(0, "GPU-a")})
    after = health.step(POLICY, state, obs)
    assert after["GPU-b"].reason == names.REASON_GPU_MISSING
    assert summarize(after).healthy_count == 1


def test_several_reasons_are_summed_up_as_multiple() -> None:
    node = Node()
    node.reader.xid(node.at(5), gpu=1, xid=79)
    node.reader.dbe(node.at(5), gpu=2)
    report = node.passes()
    assert report.reason == names.REASON_GPU_MULTIPLE
    assert report.message.startswith("2/8 GPUs unhealthy: GPU 1")


def test_the_node_message_stays_the_same_while_a_fault_persists() -> None:
    node = Node()
    node.reader.pending_pages(node.at(5), gpu=0)
    messages = {node.passes().message for _ in range(5)}
    assert len(messages) == 1


def test_a_restarted_agent_restores_unhealthy_gpus_with_a_fresh_hold_down() -> None:
    node = Node()
    node.reader.xid(node.at(5), gpu=5, xid=79)
    node.passes()
    annotation = health.encode(node.state)
    assert annotation is not None and " " not in annotation.split('"m"')[0]
    restored = health.decode(annotation, now=node.at(1000))
    (gpu,) = restored.values()
    assert (gpu.index, gpu.healthy, gpu.reason, gpu.last_fault_at) == (
        5,
        False,
        names.REASON_GPU_XID,
        node.at(1000),
    )
    assert health.encode({}) is None


@pytest.mark.parametrize("text", [None, "", "not json", "[]", '{"GPU-a": {"i": "x"}}'])
def test_a_damaged_health_annotation_restores_nothing(text: str | None) -> None:
    assert health.decode(text, now=0.0) == {}


@settings(max_examples=40, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 3), st.sampled_from([79, 13, 48, 31, 94])), max_size=12),
    st.integers(1, 5),
    st.sampled_from([0.0, 30.0, 60.0]),
)
def test_never_healthy_within_the_hold_down_of_a_fault(
    faults: list[tuple[int, int]],
    recovery_passes: int,
    hold_down_s: float,
) -> None:
    node = Node(HealthPolicy(recovery_passes=recovery_passes, hold_down_s=hold_down_s), count=4)
    seen_at: list[tuple[int, float]] = []  # (gpu, pass that saw a critical XID)
    for i, (gpu, xid) in enumerate(faults):
        node.reader.xid(node.at(PASS_S * (2 * i) + 1), gpu, xid)
        if xid not in health.APPLICATION_XIDS:
            seen_at.append((gpu, node.at(PASS_S * (2 * i + 1))))
    for _ in range(2 * len(faults) + 10):
        now = node.clock.now + PASS_S
        node.passes()
        for gpu in {g for g, _ in seen_at}:
            last = max((at for g, at in seen_at if g == gpu and at <= now), default=None)
            if last is not None and (
                now - last < hold_down_s or now - last < PASS_S * recovery_passes
            ):
                assert not node.gpu(gpu).healthy
    assert summarize(node.state).healthy  # and every GPU recovers once the faults stop
