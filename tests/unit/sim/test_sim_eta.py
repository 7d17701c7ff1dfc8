"""The ETA judged in the simulator: what the estimator showed at submission vs the real start.

World: team `a` with 8 GPUs on one 8-GPU node.
"""

from __future__ import annotations

from sim_worlds import job, queue, world

from queuectl.sim import SimOptions, parse_nodes, simulate


def eta_error(*jobs, every: int = 1):  # type: ignore[no-untyped-def]
    config = world(queue("a", 8))
    result = simulate(
        config, parse_nodes("1x8:gpu", config), tuple(jobs), SimOptions(eta_every=every)
    )
    return result.summary["eta_error"]


def test_behind_a_job_with_a_time_limit_the_estimate_is_exact() -> None:
    """The first job's limit is its runtime: the second starts exactly when the ETA said."""
    e = eta_error(job("first", 0, 8, 3600, max_exec=3600), job("second", 60, 8, 600))
    low = e["classes"]["low"]
    assert (low["count"], low["estimated"], low["unknown"]) == (2, 2, 0)
    assert low["abs_error_p90"] == 0.0
    assert low["waited"] == {"count": 1, "abs_error_p50": 0.0, "abs_error_p90": 0.0}
    assert low["actual_wait_p50"] == 0.0 and e["overall"]["abs_error_p50"] == 0.0


def test_with_nothing_finished_and_no_limits_the_estimate_is_unknown() -> None:
    e = eta_error(job("first", 0, 8, 3600), job("second", 60, 8, 600))
    assert e["overall"]["unknown"] == 1 and e["overall"]["estimated"] == 1


def test_runtimes_are_learned_only_from_jobs_finished_before_the_submission() -> None:
    """Three 1-hour jobs finish; then one runs (no limit) and another queues behind it: the
    learned hour is right, so the ETA is; the error is what the runtime guess missed."""
    jobs = [job(f"warm-{i}", i * 3600, 8, 3600) for i in range(3)]
    jobs += [job("runner", 4 * 3600, 8, 5400), job("queued", 4 * 3600 + 600, 8, 60)]
    e = eta_error(*jobs)
    assert e["overall"]["unknown"] == 0
    # said: 4 h + 1 h; actually 4 h + 1.5 h
    assert e["classes"]["low"]["waited"]["abs_error_p50"] == 1800.0


def test_judging_the_eta_does_not_change_the_simulation() -> None:
    config = world(queue("a", 4, cohort="org"), queue("b", 4, cohort="org"))
    jobs = tuple(
        job(
            f"j{i}",
            i * 300,
            1 + i % 4,
            900 + 600 * (i % 5),
            team="ab"[i % 2],
            pc=("low", "high")[i % 3 == 0],
        )
        for i in range(40)
    )
    nodes = parse_nodes("1x8:gpu", config)
    plain = simulate(config, nodes, jobs).summary
    judged = simulate(config, nodes, jobs, SimOptions(eta_every=2)).summary
    assert judged.pop("eta_error")["samples"] == 20
    assert judged == plain


def test_only_every_nth_submission_is_sampled() -> None:
    e = eta_error(*(job(f"j{i}", i * 10, 1, 60) for i in range(10)), every=3)
    assert (e["sampled_every"], e["samples"]) == (3, 4)  # the 1st, 4th, 7th and 10th
