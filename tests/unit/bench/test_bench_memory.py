"""The memory bench drives the real controller objects and decides the same on every run."""

from __future__ import annotations

from bench.memory_bench import Options, Run


def test_small_run_finishes_everything_and_repeats_its_decisions() -> None:
    first = Run(Options(scenario="baseline", limit=300)).run()
    again = Run(Options(scenario="baseline", limit=300)).run()
    assert first["counts"]["finished"] == 300
    assert first["counts"]["admitted"] >= 300
    assert first["digest"] == again["digest"]
    assert first["peak_rss_mb"] > 0
