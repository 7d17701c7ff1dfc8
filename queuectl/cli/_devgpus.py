"""Emulated GPUs on a dev environment's real node: the agent with its device plugin, its NVML
the emulator, beside the node's kubelet (`queuectl dev up --real-nodes 1 --emulated-gpus`).

Glue between testenv (the node, its supervised processes) and the agent (the emulator), which
may not import each other: it lives in the CLI, above both.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from pathlib import Path

import queuectl
from queuectl.agent.nvmlemu import build_library, environment, write_description
from queuectl.testenv import ControlPlane

SCENARIOS = Path(queuectl.__file__).resolve().parent / "agent" / "scenarios"


def scenario_path(text: str) -> Path:
    """A description file, or the name of a shipped one (`hgx-h100`, `a100-mig`)."""
    given = Path(text)
    if given.is_file():
        return given
    shipped = SCENARIOS / f"{text}.yaml"
    if shipped.is_file():
        return shipped
    names = ", ".join(sorted(p.stem for p in SCENARIOS.glob("*.yaml")))
    raise ValueError(f"{text!r} is neither a node description file nor one of: {names}")


def start_gpu_agent(
    plane: ControlPlane,
    node_name: str,
    description: Path,
    *,
    clock_file: Path | None = None,
    pod_resources_socket: Path | None = None,
    extra_args: Sequence[str] = (),
) -> None:
    """Start `queuectl agent --device-plugin` for `node_name` over the emulated `description`
    (emulated time from the agent's first nvmlInit, or the number in `clock_file`), asking the
    node's kubelet at `pod_resources_socket` which container holds which GPU. It runs as one
    of the environment's processes: its log is logs/agent-<node>.log, `stop` ends it."""
    env = environment(
        write_description(description, plane.work_dir / f"{node_name}.emu"),
        build_library(),
        clock_file=clock_file,
    )
    source_root = str(Path(queuectl.__file__).resolve().parents[1])
    env["PYTHONPATH"] = os.pathsep.join(p for p in (source_root, env.get("PYTHONPATH")) if p)
    argv = [sys.executable, "-m", "queuectl.cli.main", "agent", "--device-plugin"]
    argv += ["--node-name", node_name, "--kubeconfig", plane.kubeconfig]
    argv += ["--metrics-port", "0", "--poll-seconds", "1"]
    if pod_resources_socket is not None:
        argv += ["--pod-resources-socket", str(pod_resources_socket)]
    argv += extra_args
    plane.start_process(f"agent-{node_name}", argv, env=env)
