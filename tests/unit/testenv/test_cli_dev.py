"""`queuectl` finds its subcommands; `dev` refuses bad input clearly without starting anything."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from queuectl.cli import main as cli
from queuectl.testenv import ControlPlane, PortInUse


@pytest.fixture(autouse=True)
def isolated_state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("QUEUECTL_STATE_DIR", str(tmp_path))
    return tmp_path


def test_dev_is_discovered_as_a_subcommand() -> None:
    assert "dev" in cli.command_modules()
    parser, broken = cli.build_parser()
    assert "dev" not in broken
    assert parser.parse_args(["dev", "up", "--nodes", "2"]).nodes == 2


@pytest.mark.parametrize(
    ("argv", "code", "says"),
    [
        (["dev", "status"], 3, "is not up"),
        (["dev", "down"], 0, "is not running"),
        (["dev", "status", "--name", "other"], 3, '"other" is not up'),
    ],
)
def test_dev_on_an_environment_that_is_not_up(
    argv: list[str], code: int, says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(argv) == code
    assert says in capsys.readouterr().out


def test_dev_kubeconfig_fails_when_not_up(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["dev", "kubeconfig"]) == 1
    assert "not up" in capsys.readouterr().err


def test_a_taken_apiserver_port_is_refused_before_anything_starts(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        plane = ControlPlane(tmp_path / "env", apiserver_port=port)
        with pytest.raises(PortInUse) as caught:
            plane.start()
    assert f"port {port}" in str(caught.value)
    assert "--apiserver-port" in caught.value.fix
    assert plane.supervisor.records == []


def test_dev_up_reports_a_taken_port_as_one_clear_line(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        assert cli.main(["dev", "up", "--apiserver-port", str(port)]) == 1
    assert f"port {port} on 127.0.0.1" in capsys.readouterr().err


def test_emulated_gpus_need_exactly_one_real_node_and_start_nothing_without(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert cli.main(["dev", "up", "--emulated-gpus", "hgx-h100"]) == 2
    assert "--emulated-gpus needs --real-nodes 1" in capsys.readouterr().err


def test_emulated_gpus_name_a_description_file_or_a_shipped_node(
    capsys: pytest.CaptureFixture[str],
) -> None:
    parser, _ = cli.build_parser()
    args = parser.parse_args(["dev", "up", "--real-nodes", "1", "--emulated-gpus", "a100-mig"])
    assert args.emulated_gpus.name == "a100-mig.yaml"
    with pytest.raises(SystemExit):
        parser.parse_args(["dev", "up", "--emulated-gpus", "h1OO"])
    assert "'h1OO' is neither a node description file nor one of: a100-mig" in (
        capsys.readouterr().err
    )
