"""`queuectl import kueue`: files, directories and stdin in; YAML and a report out, or nothing.

The conversion itself is tested in tests/unit/kueue; here only what the command adds: reading,
writing whole or not at all, the report's two formats, one-line errors.
"""

from __future__ import annotations

import io
import json
import shutil
from pathlib import Path

import pytest
import yaml

from queuectl.cli.main import main

DATA = Path(__file__).resolve().parents[2] / "data" / "kueue"
SETUP = DATA / "admission-fair-sharing-setup.yaml"


def test_a_sample_file_becomes_yaml_on_stdout_and_a_report_on_stderr(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["import", "kueue", "-f", str(SETUP)]) == 0
    out, err = capsys.readouterr()
    objects = list(yaml.safe_load_all(out))
    assert [o["kind"] for o in objects] == [
        "ResourceFlavor",
        "ClusterQueue",
        "LocalQueue",
        "LocalQueue",
    ]
    assert out.startswith("# Converted by `queuectl import kueue`")
    assert err.startswith("converted 4 object(s); 3 note(s)")
    assert "ClusterQueue/cluster-queue: spec.admissionScope dropped" in err


def test_a_directory_is_read_file_by_file_and_the_output_goes_to_a_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    src = tmp_path / "kueue"
    src.mkdir()
    shutil.copy(DATA / "tas-sample-gpu-queues.yaml", src / "a.yaml")
    shutil.copy(DATA / "workload-priority-class.yaml", src / "b.yml")
    (src / "notes.txt").write_text("not a manifest")  # not read, as kubectl apply -f DIR
    out = tmp_path / "queuectl.yaml"
    assert main(["import", "kueue", "-f", str(src), "-o", str(out)]) == 0
    assert capsys.readouterr().out == ""
    kinds = [o["kind"] for o in yaml.safe_load_all(out.read_text())]
    assert kinds == [
        "Topology",
        "ResourceFlavor",
        "WorkloadPriorityClass",
        "ClusterQueue",
        "LocalQueue",
    ]
    assert list(tmp_path.glob(".queuectl.yaml.*")) == []  # no temporary file left


def test_stdin_and_a_json_report_in_a_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO(SETUP.read_text()))
    report = tmp_path / "report.json"
    args = ["import", "kueue", "-f", "-", "--report", str(report), "--report-format", "json"]
    assert main(args) == 0
    data = json.loads(report.read_text())
    assert data["converted"][0] == {
        "document": "-#1 ResourceFlavor/default-flavor",
        "kind": "ResourceFlavor",
        "name": "default-flavor",
    }
    assert {n["action"] for n in data["notes"]} == {"dropped"}
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize(
    ("content", "says"),
    [
        ("kind: [", "bad.yaml: not valid YAML at line 1, column 8"),
        (
            "apiVersion: kueue.x-k8s.io/v1beta2\nkind: LocalQueue\nmetadata: {name: q}\n",
            "#1 LocalQueue/q: spec.clusterQueue: Field required",
        ),
        ("apiVersion: v1\nkind: Namespace\nmetadata: {name: n}\n", "no Kueue object"),
    ],
)
def test_bad_input_fails_in_one_error_and_leaves_the_output_file_as_it_was(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: str, says: str
) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(content)
    out = tmp_path / "out.yaml"
    out.write_text("what was there\n")
    # a good file beside it: still nothing is written
    good = [] if "Namespace" in content else ["-f", str(SETUP)]
    assert main(["import", "kueue", *good, "-f", str(bad), "-o", str(out)]) == 1
    err = capsys.readouterr().err
    assert err.startswith("queuectl: error: ") and says in err
    assert "Traceback" not in err
    assert out.read_text() == "what was there\n"


def test_a_missing_path_and_an_empty_directory_are_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["import", "kueue", "-f", str(tmp_path / "nope.yaml")]) == 1
    assert "nope.yaml: no such file or directory" in capsys.readouterr().err
    assert main(["import", "kueue", "-f", str(tmp_path)]) == 1
    assert "no *.yaml, *.yml, *.json files in it" in capsys.readouterr().err


def test_the_source_and_a_file_are_required(capsys: pytest.CaptureFixture[str]) -> None:
    for argv in (["import"], ["import", "kueue"], ["import", "volcano", "-f", "x"]):
        with pytest.raises(SystemExit) as exc:
            main(argv)
        assert exc.value.code == 2
    capsys.readouterr()
