"""The simulator on tiny traces: when jobs start and end, and what preemption costs them."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
from sim_worlds import job, queue, world

from queuectl.sim import SimInputError, parse_nodes, simulate
from queuectl.sim.engine import SimResult

ONE_NODE = "1x8:gpu"


def run(jobs: list, *queues: dict, nodes: str = ONE_NODE) -> SimResult:  # type: ignore[type-arg]
    config = world(*(queues or (queue("a", 8),)))
    return simulate(config, parse_nodes(nodes, config), tuple(jobs))


def times(result: SimResult, name: str, team: str = "a") -> tuple[float | None, float | None]:
    rec = result.recorder.jobs[f"{team}/{name}"]
    return rec.admitted, rec.finished


def test_a_job_waits_exactly_until_the_one_before_it_completes() -> None:
    result = run([job("first", 0, 8, 100), job("second", 10, 8, 50)])
    assert times(result, "first") == (0, 100)
    assert times(result, "second") == (100, 150)
    assert result.summary["wait_seconds"]["overall"]["p99"] == 90.0  # type: ignore[index]


def test_a_preempted_job_loses_the_work_since_its_last_checkpoint() -> None:
    # 700 s done with a checkpoint every 300 s: 600 s kept, 100 s x 8 GPUs lost
    result = run([job("low", 0, 8, 1000, checkpoint=300), job("urgent", 700, 8, 100, pc="high")])
    assert times(result, "urgent") == (700, 800)
    assert times(result, "low") == (0, 800 + 400)
    pre = result.summary["preemptions"]
    assert pre["total"] == 1  # type: ignore[index]
    assert pre["gpu_hours_lost"] == round(100 * 8 / 3600, 2)  # type: ignore[index]


def test_without_checkpoints_a_preemption_loses_everything() -> None:
    result = run([job("low", 0, 8, 1000), job("urgent", 700, 8, 100, pc="high")])
    assert times(result, "low") == (0, 800 + 1000)


def test_the_victim_keeps_running_through_its_grace_period() -> None:
    result = run(
        [job("low", 0, 8, 2000, pc="grace", checkpoint=300), job("urgent", 700, 8, 100, pc="high")]
    )
    # noticed at 700, suspended at 1000 with 900 s saved; the preemptor starts then
    assert times(result, "urgent") == (1000, 1100)
    assert times(result, "low") == (0, 1100 + 1100)


def test_a_victim_that_finishes_within_its_grace_period_just_finishes() -> None:
    result = run([job("low", 0, 8, 800, pc="grace"), job("urgent", 700, 8, 100, pc="high")])
    assert times(result, "low") == (0, 800)
    assert times(result, "urgent") == (800, 900)
    assert result.summary["preemptions"]["gpu_hours_lost"] == 0  # type: ignore[index]


def test_work_younger_than_its_minimum_runtime_is_not_preempted() -> None:
    result = run([job("low", 0, 8, 5000, pc="protected"), job("urgent", 100, 8, 100, pc="high")])
    assert times(result, "urgent") == (600, 700)


def test_maximum_execution_time_stops_the_job_for_good() -> None:
    result = run([job("runaway", 0, 8, 1000, max_exec=300), job("next", 10, 8, 10)])
    assert times(result, "next") == (300, 310)
    assert result.summary["jobs"]["stopped_max_exec"] == 1  # type: ignore[index]
    assert result.summary["jobs"]["finished"] == 1  # type: ignore[index]


def test_a_job_that_can_never_fit_is_reported_with_its_reason() -> None:
    result = run([job("huge", 0, 8, 10, pods=2)])
    never = result.summary["never_admitted"]
    assert list(never) == ["a/huge"]  # type: ignore[call-overload]
    assert "ExceedsMaxQuota" in never["a/huge"]  # type: ignore[index]


def test_borrowing_and_reclaim_are_measured() -> None:
    a, b = queue("a", 8, cohort="org"), queue("b", 8, cohort="org")
    jobs = [job("borrower", 0, 16, 3600, team="a"), job("owner", 600, 8, 60, team="b")]
    result = run(jobs, a, b, nodes="2x8:gpu")
    borrowing = result.summary["borrowing"]
    # borrowed 8 GPUs until reclaimed at 600, and again from 660 for its whole hour (it had
    # no checkpoint: it starts over)
    assert borrowing["gpu_hours_borrowed"] == round(8 * (600 + 3600) / 3600, 2)  # type: ignore[index]
    assert borrowing["reclaim_preemptions"] == 1  # type: ignore[index]
    assert times(result, "owner", "b") == (600, 660)


def test_bad_references_in_the_trace_are_named() -> None:
    config = world(queue("a", 8))
    nodes = parse_nodes(ONE_NODE, config)
    lost = replace(job("x", 0, 1, 1), queue="nope")
    with pytest.raises(SimInputError, match="no LocalQueue a/nope"):
        simulate(config, nodes, (lost,))
    with pytest.raises(SimInputError, match="no WorkloadPriorityClass 'gold'"):
        simulate(config, nodes, (job("x", 0, 1, 1, pc="gold"),))


def test_same_seed_same_json(samples_run: tuple[str, str, str]) -> None:
    first, again, other = samples_run
    assert first == again
    assert first != other


@pytest.fixture(scope="module")
def samples_run() -> tuple[str, str, str]:
    from pathlib import Path

    import yaml

    from queuectl.sim import GenerateOptions, SimOptions, generate_trace, load_config

    root = Path(__file__).resolve().parents[3] / "config" / "samples"
    docs = [
        (str(f), d) for f in sorted(root.glob("*.yaml")) for d in yaml.safe_load_all(f.read_text())
    ]
    config = load_config(docs)
    nodes = parse_nodes("8x8:H100,4x8:A100", config)

    def once(seed: int) -> str:
        jobs = generate_trace(config, nodes, GenerateOptions(jobs=150, days=0.5, seed=seed))
        result = simulate(config, nodes, jobs, SimOptions(node_failures=0.5, seed=seed))
        return json.dumps(result.summary, sort_keys=True)

    return once(7), once(7), once(8)
