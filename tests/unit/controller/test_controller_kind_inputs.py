"""What a kind reads its pod sets from (a TrainJob's runtimes) is held by the controller's
cache like the kinds themselves: watched once served, and answered to the webhooks' lookup."""

from __future__ import annotations

from typing import Any

from queuectl.controller.cache import Cache
from queuectl.controller.kinds import KindWatches
from queuectl.jobs.registry import KINDS
from queuectl.jobs.trainjob import CLUSTER_RUNTIMES, RUNTIMES, TRAIN_JOBS
from tests.unit.jobs.trainjob_cases import docs


def test_the_runtimes_are_watched_beside_the_kinds_and_answer_the_webhooks() -> None:
    cache = Cache.for_kinds(None, KINDS.values())  # type: ignore[arg-type]
    watches = KindWatches(None, cache, KINDS.values())  # type: ignore[arg-type]
    assert {TRAIN_JOBS, CLUSTER_RUNTIMES, RUNTIMES} <= set(watches.resources)
    assert CLUSTER_RUNTIMES not in cache.job_kinds  # not a kind: no pod is ever owned by one
    runtime: dict[str, Any] = docs()["torch-distributed"]
    runtime["metadata"]["resourceVersion"] = "1"
    cache.store(CLUSTER_RUNTIMES).apply("ADDED", runtime)
    assert cache.input_object(CLUSTER_RUNTIMES, "", "torch-distributed") == runtime
    assert cache.input_object(RUNTIMES, "team-a", "torch-distributed") is None
