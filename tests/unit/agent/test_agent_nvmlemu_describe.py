"""Node descriptions for the NVML emulator: what they compile to, and bad ones refused with a
message that names the entry and what to write; a missing compiler is a clear build error."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from queuectl.agent.nvmlemu import (
    DescriptionError,
    EmulatorBuildError,
    build_library,
    compile_description,
    environment,
    write_description,
)
from queuectl.agent.nvmlemu.__main__ import main

SCENARIOS = Path(__file__).resolve().parents[3] / "queuectl" / "agent" / "scenarios"


def records(text: str, kind: str) -> list[list[str]]:
    return [line.split()[1:] for line in text.splitlines() if line.split()[0] == kind]


def test_every_shipped_scenario_compiles(tmp_path: Path) -> None:
    for path in sorted(SCENARIOS.glob("*.yaml")):
        text = write_description(path, tmp_path / f"{path.stem}.emu").read_text()
        assert len(records(text, "gpu")) == 8, path.name


def test_an_nvswitch_node_links_every_gpu_into_the_switches() -> None:
    text = compile_description({"model": "H100", "count": 2, "topology": "nvswitch"})
    links = records(text, "link")
    assert len(links) == 2 * 18
    assert {link[2] for link in links} == {"2"}  # remote type: NVSwitch
    assert {link[3] for link in links} == {f"00000000:0{n}:00.0" for n in (5, 6, 7, 8)}


def test_direct_links_are_shared_among_a_gpus_peers() -> None:
    text = compile_description({"model": "A100", "count": 4, "topology": "full-mesh"})
    gpu0 = [link for link in records(text, "link") if link[0] == "0"]
    assert len(gpu0) == 12 and {link[2] for link in gpu0} == {"0"}  # 4 links to each of 3 peers
    assert (
        compile_description({"model": "L40S", "count": 2, "topology": "none"}).count("\nlink ") == 0
    )


def test_the_timeline_is_sorted_by_time_keeping_the_written_order_within_a_time() -> None:
    text = compile_description(
        {
            "count": 2,
            "timeline": [
                {"at": 50, "gpu": 1, "xid": 79},
                {"at": 5, "gpu": 0, "utilization": {"gpu": 80, "memory": 20}, "power": 400},
                {"at": 5, "gpu": 0, "process": {"pid": 7, "sm": 60, "memory_mib": 1}},
            ],
        }
    )
    assert records(text, "at") == [
        ["5.000000", "0", "power", "400000"],
        ["5.000000", "0", "utilization", "80", "20"],
        ["5.000000", "0", "process", "7", "-1", "1048576", "60", "0"],
        ["50.000000", "1", "xid", "79"],
    ]


@pytest.mark.parametrize(
    ("description", "message"),
    [
        ({"model": "V100"}, "model 'V100' is unknown: use one of H100"),
        ({"count": 0}, "count: 0 is not a number from 1 to 16"),
        ({"topology": "torus"}, "topology 'torus' is unknown"),
        ({"gpus": 8}, "unknown key(s) ['gpus']"),
        ({"mig": "all-8g.90gb"}, "mig: MIG profile '8g.90gb' does not fit"),
        ({"fabric": {"cluster": "x"}}, "fabric: write {cluster: <UUID>, clique: <int>}"),
        ({"timeline": [{"at": 1, "gpu": 8, "xid": 79}]}, "timeline[0].gpu: 8 is not a number"),
        ({"timeline": [{"at": 1, "gpu": 0}]}, "timeline[0]: no event: add one of xid"),
        ({"timeline": [{"at": 1, "gpu": 0, "xdi": 79}]}, "timeline[0]: unknown key(s) ['xdi']"),
        ({"timeline": [{"gpu": 0, "xid": 79}]}, "timeline[0]: write a mapping with at"),
        (
            {"timeline": [{"at": 1, "gpu": 0, "process": {"pid": 3, "mig": 0}}]},
            "timeline[0].process.mig: the GPU has 0 MIG device(s)",
        ),
        (
            {"timeline": [{"at": 1, "gpu": 0, "utilization": 140}]},
            "timeline[0].utilization: 140 is not a number from 0 to 100",
        ),
    ],
)
def test_a_bad_description_is_refused_with_what_to_write(
    description: dict[str, Any], message: str
) -> None:
    with pytest.raises(DescriptionError) as caught:
        compile_description(description)
    assert message in str(caught.value)


def test_a_bad_file_names_itself(tmp_path: Path) -> None:
    path = tmp_path / "node.yaml"
    path.write_text("model: H100\ncount: [\n")
    with pytest.raises(DescriptionError, match=r"node\.yaml: cannot read the node description"):
        write_description(path, tmp_path / "node.emu")


def test_without_a_c_compiler_the_build_says_what_to_install(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("CC", "no-such-cc")
    with pytest.raises(EmulatorBuildError, match="'no-such-cc' not found: install gcc"):
        build_library(tmp_path)


def test_the_child_environment_puts_the_emulator_first_and_sets_only_what_is_asked() -> None:
    env = environment(
        Path("/n.emu"),
        Path("/lib-x"),
        offset=119.5,
        base={"LD_LIBRARY_PATH": "/usr/lib", "QUEUECTL_NVML_EMU_SCALE": "60"},
    )
    assert env["LD_LIBRARY_PATH"] == "/lib-x:/usr/lib"
    assert env["QUEUECTL_NVML_EMU"] == "/n.emu"
    assert env["QUEUECTL_NVML_EMU_OFFSET"] == "119.5"
    assert "QUEUECTL_NVML_EMU_SCALE" not in env  # a stale setting from the parent is dropped


def test_run_execs_the_command_on_the_emulated_node(tmp_path: Path) -> None:
    """`python -m queuectl.agent.nvmlemu run NODE --offset 30 -- CMD`: CMD starts with the
    library first on its search path and the node and clock in its environment."""
    show = "import os; print(os.environ['QUEUECTL_NVML_EMU_OFFSET'], os.environ['LD_LIBRARY_PATH'])"
    node = str(SCENARIOS / "a100-mig.yaml")
    argv = ["-m", "queuectl.agent.nvmlemu", "run", node, "--offset", "30", "--"]
    env = {**os.environ, "QUEUECTL_CACHE_DIR": str(tmp_path)}
    done = subprocess.run(
        [sys.executable, *argv, sys.executable, "-c", show],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    offset, path = done.stdout.split()
    assert offset == "30.0"
    assert (Path(path.split(":")[0]) / "libnvidia-ml.so.1").exists()
    assert main(["run", node]) == 2  # no command after --
