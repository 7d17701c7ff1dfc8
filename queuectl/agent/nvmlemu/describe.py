"""A node description (the scripted-scenario YAML) compiled into the emulator's line format.

The YAML is the one `ScriptedReader.from_scenario` reads (model, count, topology, seed, fabric,
mig, timeline), so one file drives either reader and both name the GPUs alike (same UUIDs, bus
ids, MIG layouts). The emulator adds timeline kinds the scripted reader ignores: `power`,
`utilization` and `process` (per-process use over time). Validation is strict here so that the C
side can trust its input: every problem names the entry and what to write instead.
"""

from __future__ import annotations

import uuid as uuidlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from queuectl.agent.reader import FabricInfo
from queuectl.agent.scripted import MODELS, make_gpus, make_pairs, mig_states
from queuectl.api import gpushare

MIB = 1024 * 1024


@dataclass(frozen=True)
class ModelFacts:
    """What NVML says of a model beyond `scripted.MODELS`: PCI ids, NVSwitches, idle power."""

    pci_device_id: int
    pci_subsystem_id: int
    nvswitches: int
    idle_power_w: int


FACTS = {
    "H100": ModelFacts(0x233010DE, 0x16C110DE, 4, 70),
    "H200": ModelFacts(0x233510DE, 0x18A110DE, 4, 75),
    "A100": ModelFacts(0x20B210DE, 0x147F10DE, 6, 60),
    "L40S": ModelFacts(0x26B910DE, 0x185110DE, 0, 35),
    "B200": ModelFacts(0x290110DE, 0x199910DE, 2, 120),
}
TOP_KEYS = frozenset(
    {"model", "count", "topology", "seed", "fabric", "mig", "driver", "timeline", "unavailable"}
)
ENTRY_KEYS = frozenset(
    {"at", "gpu", "xid", "dbe", "temperature", "stop", "answer", "pending", "power"}
    | {"utilization", "process", "remap_pending", "remap_failure"}
)
PROCESS_KEYS = frozenset({"pid", "mig", "memory_mib", "sm", "memory", "exit"})
# NVML_GPU_INSTANCE_PROFILE_<n>_SLICE by GPU instance slices.
_GI_PROFILE = {1: 0, 2: 1, 3: 2, 4: 3, 7: 4, 8: 5, 6: 6}


class DescriptionError(ValueError):
    """The description cannot be emulated; the message says where and what to write."""


def _number(value: Any, where: str, low: float, high: float) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not low <= value <= high:
        raise DescriptionError(f"{where}: {value!r} is not a number from {low:g} to {high:g}")
    return float(value)


def _gpus_and_links(scenario: Mapping[str, Any]) -> list[str]:
    model = str(scenario.get("model", "H100"))
    if model not in MODELS:
        raise DescriptionError(f"model {model!r} is unknown: use one of {', '.join(MODELS)}")
    count = int(_number(scenario.get("count", 8), "count", 1, 16))
    topology = str(scenario.get("topology", "nvswitch"))
    seed = str(scenario.get("seed", "node"))
    fabric = scenario.get("fabric")
    try:
        info = FabricInfo(str(fabric["cluster"]), int(fabric["clique"])) if fabric else None
        cluster_hex = uuidlib.UUID(info.cluster_uuid).hex if info else ""
    except (KeyError, TypeError, ValueError) as exc:
        raise DescriptionError(
            f"fabric: write {{cluster: <UUID>, clique: <int>}} ({exc})"
        ) from None
    _name, _mib, _cc, model_links = MODELS[model]
    facts = FACTS[model]
    gpus = make_gpus(model, count, seed, info)
    try:
        pairs = make_pairs(topology, count, model_links)
    except ValueError:
        raise DescriptionError(
            f"topology {topology!r} is unknown: use nvswitch, full-mesh, pairs, ring or none"
        ) from None
    lines = []
    for g in gpus:
        cc_major, cc_minor = g.compute_capability or (0, 0)
        capable = int(not g.name.endswith("L40S"))
        links = model_links if topology != "none" else 0
        lines.append(
            f"gpu {g.index} {g.uuid} {g.pci_bus_id} {facts.pci_device_id:08X} "
            f"{facts.pci_subsystem_id:08X} {g.memory_total_bytes} {cc_major} {cc_minor} "
            f"{capable} {links} {facts.idle_power_w * 1000} 40 {g.name}"
        )
        if info is not None:
            lines.append(f"fabric {g.index} {cluster_hex} {info.clique_id}")
    bus = {g.index: g.pci_bus_id for g in gpus}
    peers: dict[int, list[int]] = {g.index: [] for g in gpus}
    for p in pairs:
        lines.append(f"pair {p.a} {p.b} {int(p.pcie)} {int(p.p2p_nvlink)}")
        if p.nvlinks and not p.via_switch:
            peers[p.a].append(p.b)
            peers[p.b].append(p.a)
    for g in gpus:
        if topology == "nvswitch":  # every link into one of the NVSwitches, round robin
            switches = max(1, facts.nvswitches)
            for link in range(model_links):
                lines.append(f"link {g.index} {link} 2 00000000:{0x05 + link % switches:02X}:00.0")
        elif peers[g.index]:  # direct links, the GPU's links shared among its peers
            per_peer = max(1, model_links // len(peers[g.index]))
            link = 0
            for peer in peers[g.index]:
                for _ in range(per_peer):
                    if link < model_links:
                        lines.append(f"link {g.index} {link} 0 {bus[peer]}")
                        link += 1
    lines += _mig_lines(scenario.get("mig"), gpus, seed)
    return lines


def _mig_lines(mig: Any, gpus: list[Any], seed: str) -> list[str]:
    if mig is None:
        return []
    count = len(gpus)
    layouts = dict.fromkeys(range(count), mig) if isinstance(mig, str) else dict(mig)
    layouts = {int(k): str(v) for k, v in layouts.items()}
    if any(not 0 <= k < count for k in layouts):
        raise DescriptionError(f"mig: GPU indexes must be 0 to {count - 1}")
    try:
        states = mig_states(gpus, layouts, seed)
    except ValueError as exc:
        raise DescriptionError(f"mig: {exc}") from None
    lines = []
    for gpu, state in zip(gpus, states, strict=True):
        if not state.devices:
            continue
        total_gb = -(-gpu.memory_total_bytes // (1024 * MIB))
        profiles = gpushare.parse_layout(layouts[gpu.index], total_gb)
        for slot, (dev, profile) in enumerate(zip(state.devices, profiles, strict=True)):
            lines.append(
                f"mig {gpu.index} {slot} {slot + 1} {_GI_PROFILE.get(dev.gi_slices, 0)} "
                f"{dev.gi_slices} {dev.ci_slices} {dev.memory_mib} {dev.multiprocessors} "
                f"{dev.start} {dev.size} {dev.uuid} {gpu.name} MIG {profile}"
            )
    return lines


def _entry_lines(index: int, entry: Any, count: int, migs: dict[int, int]) -> list[str]:
    where = f"timeline[{index}]"
    if not isinstance(entry, Mapping) or "at" not in entry or "gpu" not in entry:
        raise DescriptionError(f"{where}: write a mapping with at (seconds), gpu and an event")
    unknown = set(entry) - ENTRY_KEYS
    if unknown:
        raise DescriptionError(
            f"{where}: unknown key(s) {sorted(unknown)}: use {', '.join(sorted(ENTRY_KEYS))}"
        )
    at = _number(entry["at"], f"{where}.at", 0, 1e9)
    gpu = int(_number(entry["gpu"], f"{where}.gpu", 0, count - 1))
    head = f"at {at:.6f} {gpu}"
    out = []
    if "xid" in entry:
        out.append(f"{head} xid {int(_number(entry['xid'], f'{where}.xid', 1, 1e6))}")
    if entry.get("dbe"):
        out.append(f"{head} dbe")
    if "temperature" in entry:
        out.append(f"{head} temperature {int(_number(entry['temperature'], where, 0, 200))}")
    if "power" in entry:
        out.append(f"{head} power {int(_number(entry['power'], f'{where}.power', 0, 5000) * 1000)}")
    if entry.get("stop"):
        out.append(f"{head} lost")
    if entry.get("answer"):
        out.append(f"{head} answer")
    for key, kind in (("pending", "pending"), ("remap_pending", "remap-pending")):
        if key in entry:
            out.append(f"{head} {kind} {int(bool(entry[key]))}")
    if "remap_failure" in entry:
        out.append(f"{head} remap-failure {int(bool(entry['remap_failure']))}")
    if "utilization" in entry:
        out.append(f"{head} {_utilization(entry['utilization'], f'{where}.utilization')}")
    if "process" in entry:
        out.append(f"{head} {_process(entry['process'], f'{where}.process', migs.get(gpu, 0))}")
    if not out:
        raise DescriptionError(
            f"{where}: no event: add one of xid, dbe, temperature, power, "
            "stop, answer, pending, utilization, process"
        )
    return out


def _utilization(value: Any, where: str) -> str:
    if value == "auto":
        return "utilization-auto"
    if isinstance(value, Mapping):
        gpu, memory = value.get("gpu", 0), value.get("memory", 0)
    else:
        gpu, memory = value, 0
    return f"utilization {int(_number(gpu, where, 0, 100))} {int(_number(memory, where, 0, 100))}"


def _process(value: Any, where: str, mig_devices: int) -> str:
    if not isinstance(value, Mapping) or "pid" not in value:
        raise DescriptionError(
            f"{where}: write {{pid, sm, memory, memory_mib[, mig]}} or {{pid, exit: true}}"
        )
    unknown = set(value) - PROCESS_KEYS
    if unknown:
        raise DescriptionError(
            f"{where}: unknown key(s) {sorted(unknown)}: use {sorted(PROCESS_KEYS)}"
        )
    pid = int(_number(value["pid"], f"{where}.pid", 1, 2**31))
    if value.get("exit"):
        return f"process-end {pid}"
    slot = int(_number(value["mig"], f"{where}.mig", 0, 6)) if "mig" in value else -1
    if slot >= mig_devices:
        raise DescriptionError(f"{where}.mig: the GPU has {mig_devices} MIG device(s)")
    used = int(_number(value.get("memory_mib", 0), f"{where}.memory_mib", 0, 1e7) * MIB)
    sm = int(_number(value.get("sm", 0), f"{where}.sm", 0, 100))
    memory = int(_number(value.get("memory", 0), f"{where}.memory", 0, 100))
    return f"process {pid} {slot} {used} {sm} {memory}"


def compile_description(scenario: Mapping[str, Any], driver: str = "550.54.15") -> str:
    """The emulator's input for a scenario mapping; raises `DescriptionError` on bad input."""
    if not isinstance(scenario, Mapping):
        raise DescriptionError("the description must be a mapping (model, count, topology, ...)")
    unknown = set(scenario) - TOP_KEYS
    if unknown:
        raise DescriptionError(
            f"unknown key(s) {sorted(unknown)}: use {', '.join(sorted(TOP_KEYS))}"
        )
    if scenario.get("unavailable") is not None:
        raise DescriptionError("unavailable: the emulator always loads; leave it to --scripted")
    driver = str(scenario.get("driver", driver))
    lines = ["nvml-emu 1", f"driver {driver}", f"nvml 12.{driver}", "cuda 12040"]
    lines += _gpus_and_links(scenario)
    count = sum(1 for line in lines if line.startswith("gpu "))
    migs: dict[int, int] = {}
    for line in lines:
        if line.startswith("mig "):
            gpu = int(line.split()[1])
            migs[gpu] = migs.get(gpu, 0) + 1
    timeline = scenario.get("timeline") or []
    if not isinstance(timeline, list):
        raise DescriptionError("timeline: write a list of {at, gpu, <event>} entries")
    events: list[tuple[float, int, str]] = []
    for n, entry in enumerate(timeline):
        for line in _entry_lines(n, entry, count, migs):
            events.append((float(entry["at"]), len(events), line))
    lines += [line for _at, _seq, line in sorted(events)]  # by time, then as written
    return "\n".join(lines) + "\n"
