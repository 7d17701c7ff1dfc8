"""Run in a child process on an emulated node (pynvml loads NVML once per process): drives the
agent's real NVML path and prints JSON lines for `test_agent_nvmlemu.py` to assert on.

  inventory             read_inventory(NvmlReader()): GPUs, pairs, MIG states
  passes T [T ...]      set the emulated clock (the file in $QUEUECTL_NVML_EMU_CLOCK) to each T
                        and run one Agent pass: per-GPU health and utilization, the node's taint
  processes T [T ...]   at each T, per GPU: running compute processes and their utilization
  wait SECONDS          NvmlReader.wait_events until an event arrives (or SECONDS pass)
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pynvml

from queuectl.agent.discovery import read_inventory
from queuectl.agent.health import HealthPolicy
from queuectl.agent.nvml import NvmlReader
from queuectl.agent.reader import GpuEvent, GpuSample
from queuectl.agent.scripted import ManualClock
from queuectl.agent.shell import Agent, AgentConfig


def emit(value: Any) -> None:
    print(json.dumps(value, default=str), flush=True)


def set_clock(t: float) -> None:
    Path(os.environ["QUEUECTL_NVML_EMU_CLOCK"]).write_text(f"{t}\n")


def inventory() -> None:
    reader = NvmlReader()
    assert reader.open() is None
    inv = read_inventory(reader)
    emit(
        {
            "gpus": [asdict(g) for g in inv.gpus],
            "pairs": [asdict(p) for p in inv.pairs],
            "mig": [asdict(m) for m in inv.mig],
        }
    )
    reader.close()


async def passes(times: list[float]) -> None:
    clock = ManualClock()
    config = AgentConfig("emulated", HealthPolicy(recovery_passes=1, hold_down_s=60))
    agent = Agent(NvmlReader(), config, None, clock=clock)
    set_clock(times[0])
    assert await agent.start() is None
    for t in times:
        set_clock(t)
        clock.now = 1_700_000_000.0 + t
        result = await agent.run_pass(wait_s=0.0)
        utilization = {
            i: s.utilization_ratio if isinstance(s, GpuSample) else s
            for i, s in result.samples.items()
        }
        unhealthy = {
            state.index: state.reason for state in result.state.values() if not state.healthy
        }
        emit(
            {
                "t": t,
                "unhealthy": unhealthy,
                "taint": result.desired.taint_reason,
                "utilization": utilization,
                "events": [[e.uuid, str(e.kind), e.xid] for e in result.events],
                "processes": {
                    i: [[p.pid, p.memory_used_bytes, p.sm_percent] for p in s.processes]
                    for i, s in result.samples.items()
                    if isinstance(s, GpuSample) and s.processes
                },
            }
        )
    await agent.close()


def processes(times: list[float]) -> None:
    pynvml.nvmlInit()
    handles = [pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(pynvml.nvmlDeviceGetCount())]
    for t in times:
        set_clock(t)
        per_gpu: dict[int, Any] = {}
        for index, handle in enumerate(handles):
            running = [
                [p.pid, p.usedGpuMemory, p.gpuInstanceId]
                for p in pynvml.nvmlDeviceGetComputeRunningProcesses(handle)
            ]
            try:
                samples = pynvml.nvmlDeviceGetProcessUtilization(handle, 0)
                util: Any = [[s.pid, s.smUtil, s.memUtil] for s in samples]
            except pynvml.NVMLError as exc:
                util = str(exc)
            if running or not isinstance(util, str) or "Not Found" not in util:
                per_gpu[index] = {"running": running, "utilization": util}
        emit({"t": t, "gpus": per_gpu})
    pynvml.nvmlShutdown()


def wait(seconds: float) -> None:
    reader = NvmlReader()
    assert reader.open() is None
    deadline = time.monotonic() + seconds
    events: list[GpuEvent] = []
    while not events and time.monotonic() < deadline:
        events = reader.wait_events(deadline - time.monotonic())
    emit([[e.uuid, str(e.kind), e.xid] for e in events])
    reader.close()


def main(argv: list[str]) -> None:
    command, args = argv[0], [float(a) for a in argv[1:]]
    if command == "inventory":
        inventory()
    elif command == "passes":
        asyncio.run(passes(args))
    elif command == "processes":
        processes(args)
    elif command == "wait":
        wait(args[0])
    else:
        raise SystemExit(f"unknown command {command!r}")


if __name__ == "__main__":
    main(sys.argv[1:])
