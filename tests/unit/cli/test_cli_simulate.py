"""`queuectl simulate` as a user runs it, on the sample manifests in config/samples."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from queuectl.cli import simulate as cli_simulate
from queuectl.cli.main import main

ROOT = Path(__file__).resolve().parents[3]
SAMPLES = str(ROOT / "config" / "samples")
NODES = "8x8:H100,4x8:A100"


def simulate(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, dict, str]:  # type: ignore[type-arg]
    try:
        code = main(["simulate", *args])
    except SystemExit as exit:  # a flag argparse refuses
        code = int(exit.code or 0)
    out = capsys.readouterr()
    lines = out.out.strip().splitlines()
    return code, (json.loads(lines[-1]) if code == 0 else {}), out.err


def test_generated_trace_on_the_samples_prints_the_json_summary_last(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    trace = tmp_path / "trace.jsonl"
    code, summary, err = simulate(
        capsys,
        "-f",
        SAMPLES,
        "--nodes",
        NODES,
        "--generate",
        "--jobs",
        "120",
        "--days",
        "0.5",
        "--save-trace",
        str(trace),
        "--html",
        str(tmp_path / "r.html"),
    )
    assert code == 0, err
    assert summary["jobs"]["total"] == 120
    assert set(summary["wait_seconds"]["teams"]) == {"team-inference", "team-llm", "team-vision"}
    assert "100% of jobs done" in err  # the progress bar
    assert (tmp_path / "r.html").read_text().count("<svg") >= 3
    # the saved trace replays to the same figures
    code, again, err = simulate(
        capsys, "-q", "-f", SAMPLES, "--nodes", NODES, "--trace", str(trace)
    )
    assert code == 0, err
    assert again == summary


def test_a_csv_trace(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    trace = tmp_path / "t.csv"
    trace.write_text(
        "submit,namespace,queue,priority_class,pods,gpus,cpu,memory,runtime,topology_required\n"
        "0,team-llm,training,research,4,8,16,256Gi,3600,rack\n"
        "60,team-vision,default,exploration,1,2,,,600,\n"
    )
    code, summary, err = simulate(
        capsys, "-q", "-f", SAMPLES, "--nodes", NODES, "--trace", str(trace)
    )
    assert code == 0, err
    assert summary["jobs"]["finished"] == 2
    assert summary["wait_seconds"]["overall"]["p99"] == 0.0


def test_compare_shows_both_runs_and_what_differs(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    more = tmp_path / "more"
    more.mkdir()
    for f in Path(SAMPLES).glob("*.yaml"):
        text = f.read_text()
        if f.name == "21-cluster-queues.yaml":  # research-vision: 16 more H100 GPUs
            docs = list(yaml.safe_load_all(text))
            gpu = docs[0]["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]
            gpu["nominalQuota"] = 32
            text = yaml.safe_dump_all(docs)
        (more / f.name).write_text(text)
    code, out, err = simulate(
        capsys,
        "--compare",
        SAMPLES,
        str(more),
        "--nodes",
        NODES,
        "--generate",
        "--jobs",
        "150",
        "--days",
        "0.5",
    )
    assert code == 0, err
    assert set(out["runs"]) == {"samples", "more"}
    assert (
        out["differences"]["fairness.queues.research-vision.entitlement"][1]
        > (out["differences"]["fairness.queues.research-vision.entitlement"][0])
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--nodes", "8x8:V100", "--generate"], "no ResourceFlavor named 'V100'"),
        (["--nodes", "eight:H100", "--generate"], "write COUNTxGPUS:FLAVOR"),
        (["--nodes", NODES, "--trace", "/nonexistent.csv"], "no such file"),
        (
            ["--nodes", NODES, "--generate", "--preemption-patience", "-1"],
            "argument --preemption-patience: -1: a number of seconds, 0 or more",
        ),
    ],
)
def test_bad_input_is_named(
    capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    code, _, err = simulate(capsys, "-f", SAMPLES, *args)
    assert code == 2
    assert message in err


def test_a_bad_trace_line_is_named(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    trace = tmp_path / "t.jsonl"
    trace.write_text('{"submit": 0, "namespace": "team-llm", "queue": "training", "runtime": -5}\n')
    code, _, err = simulate(capsys, "-f", SAMPLES, "--nodes", NODES, "--trace", str(trace))
    assert code == 2
    assert "t.jsonl:1: 'runtime'" in err


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--nodes", NODES, "--generate", "--jobs", "0"], "argument --jobs: 0: a whole number"),
        (["--nodes", NODES, "--generate", "--jobs", "1e9"], "argument --jobs: 1e9"),
        (["--nodes", NODES, "--generate", "--days", "nan"], "argument --days: nan: days"),
        (["--nodes", NODES, "--generate", "--days", "inf"], "argument --days: inf: days"),
        (["--nodes", NODES, "--generate", "--days", "-1"], "argument --days: -1: days"),
        (["--nodes", NODES, "--generate", "--load", "0"], "argument --load: 0: a ratio"),
        (["--nodes", NODES, "--generate", "--seed", "-1"], "argument --seed: -1"),
        (["--nodes", NODES, "--generate", "--seed", "1.5"], "argument --seed: 1.5"),
        (
            ["--nodes", NODES, "--generate", "--node-failures", "nan"],
            "argument --node-failures: nan: failures per node per day",
        ),
        (
            ["--nodes", NODES, "--generate", "--node-failures", "-0.1"],
            "argument --node-failures: -0.1",
        ),
        (["--nodes", NODES, "--generate", "--repair-hours", "0"], "argument --repair-hours: 0"),
        (
            ["--nodes", NODES, "--generate", "--preemption-patience", "inf"],
            "argument --preemption-patience: inf: a number of seconds",
        ),
        (["--nodes", "100001x8:H100", "--generate"], "needs 1 to 100,000 nodes"),
        (["--nodes", "8x99999999999999:H100", "--generate"], "of 1 to 1,024 GPUs each"),
        (["--nodes", "0x8:H100", "--generate"], "needs 1 to 100,000 nodes"),
    ],
)
def test_a_bad_number_on_the_command_line_is_named_with_what_is_allowed(
    capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    code, _, err = simulate(capsys, "-q", "-f", SAMPLES, *args)
    assert code == 2
    assert message in err
    assert "Traceback" not in err


def test_a_bad_number_in_a_trace_is_exit_2_with_file_line_and_field(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    trace = tmp_path / "t.jsonl"
    ok = '{"submit": 0, "namespace": "team-llm", "queue": "training", "runtime": 60, "gpus": 1}'
    trace.write_text(ok + "\n" + ok.replace('"gpus": 1', '"name": "x", "pods": 1e400') + "\n")
    code, _, err = simulate(capsys, "-q", "-f", SAMPLES, "--nodes", NODES, "--trace", str(trace))
    assert code == 2
    assert f"{trace}:2: 'pods' is inf; give a whole number of pods" in err


def strict_json(line: str) -> object:
    def refuse(name: str) -> object:
        raise ValueError(f"{name} is not JSON")

    return json.loads(line, parse_constant=refuse)


def test_the_summary_is_json_even_when_a_figure_cannot_be_computed(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A figure that divides by nothing is null in the summary, never NaN or Infinity."""
    real = cli_simulate.simulate

    def with_holes(*args: Any, **kwargs: Any) -> Any:
        result = real(*args, **kwargs)
        result.summary["fairness"]["jain_index"] = float("nan")
        result.summary["sim"]["virtual_hours"] = float("inf")
        return result

    monkeypatch.setattr(cli_simulate, "simulate", with_holes)
    trace = tmp_path / "t.csv"
    trace.write_text("submit,namespace,queue,pods,gpus,runtime\n0,team-llm,training,1,1,60\n")
    assert main(["simulate", "-q", "-f", SAMPLES, "--nodes", NODES, "--trace", str(trace)]) == 0
    summary = strict_json(capsys.readouterr().out.strip().splitlines()[-1])
    assert isinstance(summary, dict)
    assert summary["fairness"]["jain_index"] is None
    assert summary["sim"]["virtual_hours"] is None


@pytest.mark.parametrize(
    "rules", ["LessThanInitialShare,LessThanOrEqualToFinalShare", "Fair", ",", "LessThanX"]
)
def test_bad_fair_sharing_rules_are_named_with_what_to_give(
    capsys: pytest.CaptureFixture[str], rules: str
) -> None:
    code, _, err = simulate(
        capsys, "-q", "-f", SAMPLES, "--nodes", NODES, "--generate", "--fair-sharing-preemption",
        rules,
    )  # fmt: skip
    assert code == 2
    assert "argument --fair-sharing-preemption" in err
    assert "LessThanOrEqualToFinalShare" in err
    assert "Traceback" not in err


def test_one_team_always_borrows_and_fair_sharing_preemption_takes_some_back(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # team-llm's queue borrows all the time; the same trace with fair-sharing preemption off
    # and on: only with it on is anything preempted for fair sharing.
    args = ["-q", "-f", SAMPLES, "--nodes", NODES, "--generate", "--jobs", "400"]
    args += ["--days", "0.5", "--load", "1.5", "--habits", "training=always-borrows"]
    code, off, err = simulate(capsys, *args)
    assert code == 0, err
    code, on, err = simulate(capsys, *args, "--fair-sharing-preemption", "LessThanInitialShare")
    assert code == 0, err
    assert "InCohortFairSharing" not in off["preemptions"]["by_reason"]
    assert on["preemptions"]["by_reason"].get("InCohortFairSharing", 0) > 0
    for summary in (off, on):
        assert 0 < summary["fairness"]["jain_index"] <= 1
        assert set(summary["wait_seconds"]["teams"]) == {
            "team-inference",
            "team-llm",
            "team-vision",
        }


def test_eta_error_is_judged_only_when_asked_and_on_the_sampled_submissions(
    capsys: pytest.CaptureFixture[str],
) -> None:
    base = ["-f", SAMPLES, "--nodes", NODES, "--generate", "--jobs", "60", "--days", "0.2"]
    code, plain, err = simulate(capsys, "-q", *base)
    assert code == 0, err
    assert "eta_error" not in plain  # a replay per sample: only when asked for
    code, summary, err = simulate(capsys, *base, "--eta-error", "--eta-every", "7")
    assert code == 0, err
    eta = summary["eta_error"]
    assert (eta["sampled_every"], eta["samples"]) == (7, 9)
    assert eta["overall"]["count"] == 9
    assert set(eta["classes"]) <= {"exploration", "research", "production"}
    assert {"abs_error_p50", "abs_error_p90", "waited"} <= set(eta["overall"])
