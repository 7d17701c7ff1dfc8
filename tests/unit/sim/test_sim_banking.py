"""GPU time banking judged in the simulator, on the committed what-if pair
config/simulate/banking-{off,on}.yaml: the saver's bursts wait less, allocation holds."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from queuectl.sim import (
    GenerateOptions,
    SimInputError,
    generate_trace,
    load_config,
    parse_nodes,
    simulate,
)

CONFIGS = Path(__file__).parents[3] / "config" / "simulate"
HABITS = {"research": "bursty", "prod": "always-borrows", "platform": "light"}


def summary(name: str, jobs: int) -> dict[str, Any]:
    path = CONFIGS / f"banking-{name}.yaml"
    docs = [(f"{path} ({i})", d) for i, d in enumerate(yaml.safe_load_all(path.read_text()))]
    config = load_config(docs)
    nodes = parse_nodes("8x8:h100", config)
    trace = generate_trace(config, nodes, GenerateOptions(jobs, 7.0, 1, 0.7, HABITS))
    return simulate(config, nodes, trace).summary


def test_banking_shortens_the_savers_bursts_and_keeps_allocation() -> None:
    off, on = summary("off", 1200), summary("on", 1200)
    wait_off = off["wait_seconds"]["teams"]["research"]["p95"]
    wait_on = on["wait_seconds"]["teams"]["research"]["p95"]
    assert wait_on < wait_off
    alloc_off, alloc_on = off["gpu_allocation_pct"]["mean"], on["gpu_allocation_pct"]["mean"]
    assert abs(alloc_on - alloc_off) <= 1.0


@pytest.mark.parametrize(
    ("habits", "message"),
    [
        ({"nobody": "bursty"}, "no LocalQueue with GPU quota is named nobody"),
        ({"research": "lazy"}, "unknown habit lazy"),
    ],
)
def test_a_bad_habit_is_named(habits: dict[str, str], message: str) -> None:
    path = CONFIGS / "banking-off.yaml"
    config = load_config([(str(path), d) for d in yaml.safe_load_all(path.read_text())])
    nodes = parse_nodes("8x8:h100", config)
    with pytest.raises(SimInputError, match=message):
        generate_trace(config, nodes, GenerateOptions(10, 1.0, 1, 0.7, habits))
