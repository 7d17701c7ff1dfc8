"""The runner tells its own lag from lost work: a Workload evicted after its runtime was over
(its Finished patch on the way) is counted apart, since a real job controller would have
reported it finished already."""

from __future__ import annotations

import asyncio
from typing import Any

from bench.cluster.kubeapi import Api, finish_lane
from bench.cluster.load import Load
from bench.cluster.objects import Layout
from bench.cluster.record import Recorder
from bench.cluster.scenario import load
from queuectl.api import names


def workload(name: str, *conds: str) -> dict[str, Any]:
    return {
        "metadata": {
            "name": name,
            "resourceVersion": "1",
            "creationTimestamp": "2026-11-25T00:00:00Z",
        },
        "status": {
            "conditions": [
                {"type": c, "status": "True", "lastTransitionTime": "2026-11-25T00:00:01Z"}
                for c in conds
            ]
        },
    }


def test_an_eviction_after_the_runtime_is_runner_lag_and_one_mid_run_is_not() -> None:
    async def scenario() -> Load:
        layout = Layout(load("smoke"), "t")
        rec = Recorder(layout.scenario.nominal_total)
        runner = Load(Api.__new__(Api), layout, rec)
        early, late = list(runner.runtime)[:2]
        for name in (early, late):
            rec.created(name, 0.0)
            runner.observe(workload(name, names.COND_ADMITTED))
        runner.timers.pop(late).cancel()  # its runtime ran out: the finish is on its way
        for name in (early, late):
            runner.observe(workload(name, names.COND_ADMITTED, names.COND_EVICTED))
        for timer in runner.timers.values():
            timer.cancel()
        return runner

    runner = asyncio.run(scenario())
    assert runner.evicted_after_runtime == 1


def test_finishes_get_a_lane_twice_as_wide_as_submissions() -> None:
    assert finish_lane(32) == 64 and finish_lane(1) == 4
