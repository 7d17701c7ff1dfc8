"""A queue's status under a backlog: its counts change with every admission, so they are
written at most every ten seconds; anything else that changes (a condition, the GPU time bank)
is written at once, and the counts always catch up."""

from __future__ import annotations

from typing import Any

import pytest

from queuectl.api import names
from queuectl.controller.feed.corethread import CoreThread
from queuectl.controller.queues import queues
from queuectl.controller.queues.queue_status import QueueStatusWriter
from queuectl.controller.watch import kube as k
from tests.unit.controller.controller_fakes import World, new_job, queued

READY = [{"type": "Active", "status": "True", "reason": "Ready"}]
STOPPED = [{"type": "Active", "status": "False", "reason": "Stopped"}]


def queue(**status: Any) -> dict[str, Any]:
    return {"metadata": {"name": "team-a"}, "status": status}


@pytest.mark.parametrize(
    ("story", "old", "new", "last_written", "now", "due"),
    [
        (
            "nothing changed: nothing to write",
            {"pendingWorkloads": 3, "conditions": READY},
            {"pendingWorkloads": 3, "conditions": READY},
            None,
            100.0,
            False,
        ),
        (
            "a count moved a second after the last write: it waits",
            {"pendingWorkloads": 3, "conditions": READY},
            {"pendingWorkloads": 4, "conditions": READY},
            99.0,
            100.0,
            False,
        ),
        (
            "a count moved ten seconds after the last write: it is written",
            {"pendingWorkloads": 3, "conditions": READY},
            {"pendingWorkloads": 4, "conditions": READY},
            90.0,
            100.0,
            True,
        ),
        (
            "usage moved, never written by this controller (a restart): written at once",
            {"flavorsUsage": []},
            {"flavorsUsage": [{"name": "h100", "resources": []}]},
            None,
            100.0,
            True,
        ),
        (
            "the queue stopped a second after a write: written at once, counts with it",
            {"pendingWorkloads": 3, "conditions": READY},
            {"pendingWorkloads": 4, "conditions": STOPPED},
            99.0,
            100.0,
            True,
        ),
        (
            "the GPU time bank moved: written at once",
            {"gpuTimeBank": {"balance": "1"}},
            {"gpuTimeBank": {"balance": "2"}},
            99.0,
            100.0,
            True,
        ),
    ],
)
def test_counts_wait_for_the_refresh_interval_and_the_rest_is_written_at_once(
    story: str,
    old: dict[str, Any],
    new: dict[str, Any],
    last_written: float | None,
    now: float,
    due: bool,
) -> None:
    assert queues.due(queue(**old), new, last_written, now) is due, story


def queue_writes(w: World) -> int:
    return sum(1 for _, plural, _ in w.kube.writes if plural in ("clusterqueues", "localqueues"))


def cq_status(w: World) -> dict[str, Any]:
    obj = w.cache.get(k.CLUSTER_QUEUES, "cq")
    assert obj is not None
    return dict(obj.get("status") or {})


def lq_status(w: World) -> dict[str, Any]:
    obj = w.cache.get(k.LOCAL_QUEUES, "lq", "ns")
    assert obj is not None
    return dict(obj.get("status") or {})


def status_writer(w: World) -> QueueStatusWriter:
    return QueueStatusWriter(
        w.kube,  # type: ignore[arg-type]
        w.cache,
        CoreThread(w.sched),
        w.feed,
        lambda: w.now,
    )


async def test_a_new_pending_job_shows_in_the_queue_counts_within_ten_seconds() -> None:
    w = World()
    writer = status_writer(w)
    await writer.write_all()
    assert (cq_status(w)["pendingWorkloads"], lq_status(w)["pendingWorkloads"]) == (0, 0)
    writes = queue_writes(w)

    job = new_job()
    job["spec"]["template"]["spec"]["containers"][0]["resources"]["requests"][
        names.GPU_RESOURCE
    ] = "16"  # more than the queue's 8: it stays pending
    await queued(w, job)
    w.now += 1
    await writer.write_all()
    assert queue_writes(w) == writes, "a count alone waits for the refresh interval"

    w.now += queues.COUNTS_REFRESH_S
    await writer.write_all()
    assert (cq_status(w)["pendingWorkloads"], lq_status(w)["pendingWorkloads"]) == (1, 1)
    writes = queue_writes(w)
    w.now += queues.COUNTS_REFRESH_S
    await writer.write_all()
    assert queue_writes(w) == writes, "nothing moved: nothing written"


async def test_a_deleted_queue_is_forgotten_and_a_queue_of_the_same_name_is_written_at_once() -> (
    None
):
    w = World()
    writer = status_writer(w)
    await writer.write_all()
    lq = w.cache.get(k.LOCAL_QUEUES, "lq", "ns")
    assert lq is not None
    w.cache.store(k.LOCAL_QUEUES).apply("DELETED", lq)
    w.now += 1
    await writer.write_all()
    assert ("localqueues", "ns", "lq") not in writer._written, "nothing kept for a deleted queue"

    writes = queue_writes(w)
    w.add(
        k.LOCAL_QUEUES,
        {"metadata": {"name": "lq", "namespace": "ns"}, "spec": {"clusterQueue": "cq"}},
    )
    w.now += 1
    await writer.write_all()
    assert queue_writes(w) == writes + 1, "the new queue's first status is not held back"
    assert lq_status(w)["pendingWorkloads"] == 0
