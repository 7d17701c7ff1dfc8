"""The agent's real NVML path on emulated nodes: the unmodified nvidia-ml-py loads the emulator
(`libnvidia-ml.so.1`, built here with gcc) through LD_LIBRARY_PATH in a child process, and the
agent's discovery, health and sampling run over it exactly as on a GPU node.

No gcc means these tests fail (the build raises), they are never skipped.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pytest
import yaml

from queuectl.agent.discovery import read_inventory
from queuectl.agent.nvmlemu import build_library, environment, write_description
from queuectl.agent.scripted import ManualClock, ScriptedReader, gpu_uuid

ROOT = Path(__file__).resolve().parents[3]
SCENARIOS = ROOT / "queuectl" / "agent" / "scenarios"
PROBE = Path(__file__).resolve().parent / "nvmlemu_probe.py"
H100, A100 = SCENARIOS / "hgx-h100.yaml", SCENARIOS / "a100-mig.yaml"


@pytest.fixture(scope="module")
def library() -> Path:
    return build_library()


def run_on(
    library: Path, tmp_path: Path, description: Path | dict[str, Any], *argv: str, **clock: Any
) -> list[Any]:
    """Run `argv` (a probe command, or `--cli` and queuectl's arguments) on the emulated node;
    its JSON lines. The emulated clock is a file the probe sets, unless `clock` says otherwise."""
    compiled = write_description(description, tmp_path / "node.emu")
    if not clock:
        clock = {"clock_file": tmp_path / "clock"}
        (tmp_path / "clock").write_text("0\n")
    env = environment(compiled, library, **clock)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    if argv[0] == "--cli":
        command = [sys.executable, "-m", "queuectl.cli.main", *argv[1:]]
    else:
        command = [sys.executable, str(PROBE), *argv]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    if argv[0] == "--cli":
        return [json.loads(done.stdout)]
    return [json.loads(line) for line in done.stdout.splitlines()]


def scripted_inventory(description: Path | dict[str, Any]) -> dict[str, Any]:
    scenario = (
        yaml.safe_load(description.read_text()) if isinstance(description, Path) else description
    )
    reader = ScriptedReader.from_scenario(scenario, ManualClock())
    inv = read_inventory(reader)
    data: dict[str, Any] = json.loads(
        json.dumps(
            {
                "gpus": [asdict(g) for g in inv.gpus],
                "pairs": [asdict(p) for p in inv.pairs],
                "mig": [asdict(m) for m in inv.mig],
            },
            default=str,
        )
    )
    return data


def test_hgx_h100_is_discovered_through_pynvml(library: Path, tmp_path: Path) -> None:
    """`queuectl agent --once` on the emulated HGX H100: eight H100s on NVSwitch, NV18 between
    every pair, the UUIDs the description's seed gives, GPU 0 busy and everything healthy."""
    [report] = run_on(library, tmp_path, H100, "--cli", "agent", "--once", "--json")
    gpus = report["gpus"]
    assert [g["uuid"] for g in gpus] == [gpu_uuid("emu-hgx-h100", i) for i in range(8)]
    assert {g["name"] for g in gpus} == {"NVIDIA H100 80GB HBM3"}
    assert {g["memoryMiB"] for g in gpus} == {81559}
    assert {g["computeCapability"] for g in gpus} == {"9.0"}
    assert report["nvlink"] == "nvswitch"
    cells = {c for row in report["topology"]["matrix"] for c in row}
    assert cells == {"X", "NV18"}
    assert report["desired"]["labels"]["nvidia.com/gpu.product"] == "NVIDIA-H100-80GB-HBM3"
    assert report["health"]["healthy"] and report["health"]["healthyCount"] == 8
    busy, idle = gpus[0]["sample"], gpus[1]["sample"]
    assert (busy["utilization_ratio"], busy["power_w"]) == (0.97, 640.0)
    assert busy["memory_used_bytes"] == 71680 * 1024 * 1024
    assert idle["utilization_ratio"] == 0.01


def test_a100_mig_devices_are_discovered_through_pynvml(library: Path, tmp_path: Path) -> None:
    """On the emulated A100 node every GPU shows two 3g.40gb devices side by side (memory
    slices 0-3 and 4-7); in MIG mode the driver will not give a whole-GPU utilization."""
    [report] = run_on(
        library, tmp_path, A100, "--cli", "agent", "--once", "--json", "--mig-strategy", "mixed"
    )
    labels = report["desired"]["labels"]
    assert labels["nvidia.com/gpu.product"] == "NVIDIA-A100-SXM4-80GB"
    assert labels["nvidia.com/mig.strategy"] == "mixed"
    assert labels["nvidia.com/mig-3g.40gb.count"] == "16"
    assert report["nvlink"] == "nvswitch"
    assert {c for row in report["topology"]["matrix"] for c in row} == {"X", "NV12"}
    assert {g["sample"]["utilization_ratio"] for g in report["gpus"]} == {None}

    [inventory] = run_on(library, tmp_path, A100, "inventory")
    for state in inventory["mig"]:
        assert state["capable"] and state["enabled"]
        assert [(d["gi_slices"], d["start"], d["size"]) for d in state["devices"]] == [
            (3, 0, 4),
            (3, 4, 4),
        ]


NVL_FABRIC = {
    "model": "B200",
    "count": 4,
    "seed": "nvl72-tray-3",
    "fabric": {"cluster": "6b1e4c9a-0d2f-4f4e-9a55-0c3b8f1d2e77", "clique": 7},
}


@pytest.mark.parametrize(
    "description", [H100, A100, NVL_FABRIC], ids=["hgx-h100", "a100-mig", "b200-fabric"]
)
def test_one_description_drives_both_readers_alike(
    library: Path, tmp_path: Path, description: Path | dict[str, Any]
) -> None:
    """The scripted reader and the emulator, given the same description, report the same
    inventory: GPUs (fabric clique included), every pair's topology and every MIG device."""
    [emulated] = run_on(library, tmp_path, description, "inventory")
    assert emulated == scripted_inventory(description)


def test_xid_79_at_its_scripted_time_makes_gpu_3_unhealthy(library: Path, tmp_path: Path) -> None:
    """The emulated clock moves 0 -> 100 -> 121 s: GPU 3's XID 79 (t=120) arrives through the
    NVML event set on the pass after it, and the agent taints the node for it."""
    lines = run_on(library, tmp_path, H100, "passes", "0", "100", "121", "130")
    before, _, at, after = lines
    assert before["unhealthy"] == {} and before["taint"] is None
    assert at["events"] == [[gpu_uuid("emu-hgx-h100", 3), "xid", 79]]
    assert at["unhealthy"] == {"3": "CriticalXid"} and at["taint"] == "CriticalXid"
    assert after["events"] == [] and after["unhealthy"] == {"3": "CriticalXid"}


def test_a_lost_gpu_and_a_double_bit_ecc_error(library: Path, tmp_path: Path) -> None:
    """A GPU the timeline takes off the bus answers 'GPU is lost' and is not answering; a DBE
    arrives as an event and raises the volatile count."""
    description = {
        "model": "H100",
        "count": 4,
        "timeline": [{"at": 10, "gpu": 2, "stop": True}, {"at": 20, "gpu": 1, "dbe": True}],
    }
    first, lost, dbe = run_on(library, tmp_path, description, "passes", "0", "15", "25")
    assert first["unhealthy"] == {}
    assert lost["unhealthy"] == {"2": "GPUNotAnswering"}
    assert dbe["unhealthy"] == {"1": "DoubleBitEccError", "2": "GPUNotAnswering"}


def test_processes_work_then_idle_then_exit(library: Path, tmp_path: Path) -> None:
    """GPU 0's training process runs hot, idles from t=300 and exits at t=600; GPU 1's idles
    throughout. pynvml's running-process and per-process utilization calls follow the script."""
    busy, idling, gone = run_on(library, tmp_path, H100, "processes", "10", "400", "700")
    mib = 1024 * 1024
    assert busy["gpus"] == {
        "0": {"running": [[4101, 71680 * mib, 0xFFFFFFFF]], "utilization": [[4101, 97, 62]]},
        "1": {"running": [[4102, 20480 * mib, 0xFFFFFFFF]], "utilization": [[4102, 1, 0]]},
    }
    assert idling["gpus"]["0"]["utilization"] == [[4101, 2, 1]]
    assert "0" not in gone["gpus"] and gone["gpus"]["1"]["running"][0][0] == 4102


def test_the_agents_samples_carry_each_gpus_processes_and_their_sm_share(
    library: Path, tmp_path: Path
) -> None:
    """NvmlReader.sample reads running processes and their latest per-process utilization
    through pynvml, as dcgm-exporter does; a GPU with no process lists none."""
    busy, idling, gone = run_on(library, tmp_path, H100, "passes", "10", "400", "700")
    mib = 1024 * 1024
    assert busy["processes"] == {"0": [[4101, 71680 * mib, 97]], "1": [[4102, 20480 * mib, 1]]}
    assert idling["processes"]["0"] == [[4101, 71680 * mib, 2]]
    assert gone["processes"] == {"1": [[4102, 20480 * mib, 1]]}
    assert busy["utilization"]["0"] == 0.97 and idling["utilization"]["0"] == 0.02


def test_a_process_in_a_mig_device_carries_its_gpu_instance(library: Path, tmp_path: Path) -> None:
    [at_start] = run_on(library, tmp_path, A100, "processes", "1")
    running = at_start["gpus"]["0"]["running"]
    assert running == [[5201, 30720 * 1024 * 1024, 1]]  # GPU instance 1: the first 3g.40gb
    assert "Not Supported" in at_start["gpus"]["0"]["utilization"]  # per-process: not in MIG


def test_an_event_wait_sleeps_until_the_scripted_time(library: Path, tmp_path: Path) -> None:
    """Real time, started at t=119.5: the agent's blocking wait returns XID 79 when it is due,
    without the test moving any clock."""
    [events] = run_on(library, tmp_path, H100, "wait", "60", offset=119.5)
    assert events == [[gpu_uuid("emu-hgx-h100", 3), "xid", 79]]


def test_without_a_description_the_node_looks_driverless(library: Path, tmp_path: Path) -> None:
    """The library loaded but given no node: NVML will not initialize, which the agent reports as
    NVML unavailable (and the emulator says on stderr what to set)."""
    env = environment(tmp_path / "missing.emu", library)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    env.pop("QUEUECTL_NVML_EMU")
    command = [sys.executable, "-m", "queuectl.cli.main", "agent", "--once", "--json"]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["nvml"] == "unavailable"
    assert report["reason"] == "NVML cannot be initialized: Driver Not Loaded"
    assert "QUEUECTL_NVML_EMU is not set" in done.stderr
