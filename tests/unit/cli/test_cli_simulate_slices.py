"""Traces with slices and balance: a platform team replays what slices would cost in waiting."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_cli_simulate import NODES, SAMPLES, simulate

from queuectl.api import names
from queuectl.sim.trace import dump_trace, parse_trace

HEADER = "submit,namespace,queue,priority_class,pods,gpus,runtime,topology_required,"


def test_a_trace_job_in_slices_of_two_per_rack_runs_and_replays_the_same(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    trace = tmp_path / "t.csv"
    trace.write_text(
        HEADER + "topology_slices,topology_balanced\n"
        '0,team-llm,training,research,4,8,3600,block,"rack:2",true\n'
        "60,team-vision,default,exploration,2,2,600,,hostname:1,\n"
    )
    jobs = parse_trace(trace.read_text())
    assert jobs[0].topology_slices == (("rack", 2),) and jobs[0].topology_balanced
    assert parse_trace(dump_trace(jobs)) == jobs
    code, summary, err = simulate(
        capsys, "-q", "-f", SAMPLES, "--nodes", NODES, "--trace", str(trace)
    )
    assert code == 0, err
    assert summary["jobs"]["finished"] == 2


@pytest.mark.parametrize(
    ("slices", "message"),
    [
        ("rack:3", "4 pods do not make whole slices of 3"),
        ("hostname:2 rack:1", f"{names.LABEL_TOPOLOGY_RACK} is not inside"),
        ("rack", "give level:pods pairs, outermost first"),
        ("nvlink:2", "no Topology has a level 'nvlink'"),
    ],
)
def test_slices_a_replay_could_never_place_are_the_traces_error(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, slices: str, message: str
) -> None:
    trace = tmp_path / "t.csv"
    trace.write_text(
        HEADER + "topology_slices\n" + f'0,team-llm,training,research,4,8,3600,block,"{slices}"\n'
    )
    code, _, err = simulate(capsys, "-q", "-f", SAMPLES, "--nodes", NODES, "--trace", str(trace))
    assert code != 0
    assert message in err
