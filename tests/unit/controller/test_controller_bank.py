"""GPU time banking in the controller: the balance written to ClusterQueue status (paced),
exported as a gauge, and read back by a restarted controller before its first cycle."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from queuectl import metrics
from queuectl.controller.feed.corethread import CoreThread
from queuectl.controller.queues import queues
from queuectl.controller.queues.queue_status import QueueStatusWriter
from queuectl.controller.watch import kube as k
from tests.unit.controller.controller_fakes import World

T0 = 1_735_689_600.0
HOUR = 3600.0
WRITTEN = {"balanceGPUHours": 2.0, "lastUpdateTime": "2025-01-01T00:00:00Z"}


def cq(bank: dict[str, Any] | None = WRITTEN) -> dict[str, Any]:
    return {"metadata": {"name": "cq"}, "status": {"gpuTimeBank": bank} if bank else {}}


@pytest.mark.parametrize(
    ("obj", "balance", "after", "expected"),
    [
        pytest.param(cq(None), 1.5, 0, {"balanceGPUHours": 1.5}, id="first write"),
        pytest.param(cq(), 2.5, 10, WRITTEN, id="paced: moved, same sign, 10 s later"),
        pytest.param(cq(), 2.5, 30, {"balanceGPUHours": 2.5}, id="30 s later: written"),
        pytest.param(cq(), 0.0, 10, {"balanceGPUHours": 0.0}, id="credit ran out: at once"),
        pytest.param(cq(), 2.0, 3600, WRITTEN, id="not moved: never rewritten"),
        pytest.param(cq(), None, 0, None, id="bank removed: field removed"),
    ],
)
def test_the_balance_is_written_paced(
    obj: dict[str, Any], balance: float | None, after: float, expected: dict[str, Any] | None
) -> None:
    got = queues.gpu_time_bank_status(obj, balance, T0 + after)
    if expected is None or expected is WRITTEN:
        assert got == expected
    else:
        assert got is not None and got["balanceGPUHours"] == expected["balanceGPUHours"]
        assert got["lastUpdateTime"] != WRITTEN["lastUpdateTime"] or after == 0


def banked_world() -> World:
    w = World()
    obj = copy.deepcopy(w.cache.get(k.CLUSTER_QUEUES, "cq"))
    assert obj is not None
    obj["spec"]["gpuTimeBank"] = {"accrualRate": 1, "capGPUHours": 100}
    obj["metadata"]["generation"] = 2
    stored = w.kube.put(k.CLUSTER_QUEUES, obj)
    w.cache.store(k.CLUSTER_QUEUES).apply("MODIFIED", stored)
    return w


def writer(w: World) -> QueueStatusWriter:
    return QueueStatusWriter(
        w.kube,  # type: ignore[arg-type]
        w.cache,
        CoreThread(w.sched),
        w.feed,
        lambda: w.now,
    )


def written(w: World) -> Any:
    obj = w.cache.get(k.CLUSTER_QUEUES, "cq")
    assert obj is not None
    return obj["status"].get("gpuTimeBank")


async def test_an_idle_queue_earns_credit_shown_in_status_and_metrics_and_kept_over_a_restart() -> (
    None
):
    w = banked_world()
    w.sched.run_cycle(w.now)
    w.now += HOUR  # 8 nominal GPUs idle for an hour
    await writer(w).write_all()
    assert written(w)["balanceGPUHours"] == pytest.approx(8.0)
    gauge = metrics.CONTROLLER_REGISTRY.get_sample_value(
        "queuectl_cluster_queue_gpu_time_bank_gpu_hours", {"cluster_queue": "cq"}
    )
    assert gauge == pytest.approx(8.0)

    writes = len(w.kube.writes)
    w.now += 10
    await writer(w).write_all()
    assert len(w.kube.writes) == writes  # paced: nothing else changed, nothing written

    # A new controller: the same objects (status included), a fresh core.
    again = World()
    for obj in w.cache.store(k.CLUSTER_QUEUES).values():
        again.cache.store(k.CLUSTER_QUEUES).apply("MODIFIED", again.kube.put(k.CLUSTER_QUEUES, obj))
    again.now = w.now
    await writer(again).restore_banks()
    again.sched.run_cycle(again.now)
    assert again.sched.gpu_time_bank("cq", again.now) == pytest.approx(8.0)
    assert again.sched.gpu_time_bank("cq", again.now + HOUR) == pytest.approx(16.0)
