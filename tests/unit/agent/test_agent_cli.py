"""`queuectl agent --once` as a person checking a node would run it, on a scripted node and on
this GPU-less machine."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from queuectl.api import names
from queuectl.cli.main import main

SCENARIO = (
    Path(__file__).resolve().parents[3] / "queuectl" / "agent" / "scenarios" / "h100-xid79.yaml"
)


@pytest.fixture(autouse=True)
def no_cluster(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)


def test_once_prints_the_node_it_found_and_what_it_would_write(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["agent", "--once", "--scripted", str(SCENARIO), "--node-name", "demo"]) == 0
    out = capsys.readouterr().out
    assert "Node demo: 8 GPU(s), NVLink class nvswitch" in out
    assert "label nvidia.com/gpu.product=NVIDIA-H100-80GB-HBM3" in out
    assert "taint gpu.queuectl.io/unhealthy=CriticalXid:NoSchedule" in out
    assert "the Node was not read" in out


def test_once_json_is_machine_readable(capsys: pytest.CaptureFixture[str]) -> None:
    assert (
        main(["agent", "--once", "--json", "--scripted", str(SCENARIO), "--node-name", "demo"]) == 0
    )
    body = json.loads(capsys.readouterr().out)
    assert body["mode"] == "no-cluster" and body["nvlink"] == "nvswitch"
    assert body["health"]["healthyCount"] == 7
    assert [g["index"] for g in body["gpus"] if not g["healthy"]] == [3]
    assert body["desired"]["labels"][names.LABEL_GPU_HEALTHY_COUNT] == "7"
    assert body["desired"]["condition"]["status"] == "False"


def test_once_without_nvml_says_so_and_exits_zero(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["agent", "--once", "--node-name", "cpu-node"]) == 0
    assert "NVML unavailable" in capsys.readouterr().out


def test_write_needs_once(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["agent", "--write"]) == 2
    assert "--write only applies with --once" in capsys.readouterr().err


def test_a_bad_xid_list_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["agent", "--once", "--ignore-xids", "13,x"])
    assert exit_.value.code == 2
    assert "not a comma-separated list of XIDs" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("flags", "says"),
    [
        (["--once"], "does not apply with --once"),
        (["--mig-strategy", "mixed"], "whole GPUs only"),
        (["--time-slicing-replicas", "4"], "whole GPUs only"),
        (["--device-plugin-dir", "/tmp/" + "d" * 100], "use a shorter --device-plugin-dir"),
    ],
)
def test_a_device_plugin_it_cannot_serve_is_refused_before_it_starts(
    flags: list[str], says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["agent", "--device-plugin", *flags]) == 2
    assert says in capsys.readouterr().err
