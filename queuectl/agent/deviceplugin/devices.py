"""What the device plugin says, from what the agent knows: pure functions, no gRPC.

A device is a whole GPU named by its NVML UUID (as NVIDIA's plugin with `DEVICE_ID_STRATEGY=
uuid`), so the IDs the kubelet records, the PodResources API reports and NVML names all agree.
Health is the agent's own decision (`health.step`): a GPU the agent counts unhealthy is
`Unhealthy` here, so the kubelet withdraws it from allocatable at the same moment as the taint.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from queuectl.agent.discovery import Inventory
from queuectl.agent.health import GpuState

HEALTHY = "Healthy"
UNHEALTHY = "Unhealthy"
VISIBLE_DEVICES_ENV = "NVIDIA_VISIBLE_DEVICES"


@dataclass(frozen=True, order=True)
class PluginDevice:
    """One advertised GPU: its NVML index (for ordering), UUID (the device ID) and health."""

    index: int
    uuid: str
    health: str


class UnknownDevices(ValueError):
    """The kubelet asked for device IDs this plugin never advertised."""


def plugin_devices(inventory: Inventory, state: Mapping[str, GpuState]) -> tuple[PluginDevice, ...]:
    """Every GPU NVML lists, plus any the agent still tracks as faulted after NVML lost it
    (a vanished GPU must read Unhealthy, not silently drop out while a pod holds it)."""
    rows = {
        g.uuid: PluginDevice(g.index, g.uuid, _health(state.get(g.uuid))) for g in inventory.gpus
    }
    for uuid, s in state.items():
        if uuid not in rows and not s.healthy:
            rows[uuid] = PluginDevice(s.index, uuid, _health(s))
    return tuple(sorted(rows.values()))


def _health(state: GpuState | None) -> str:
    return UNHEALTHY if state is not None and not state.healthy else HEALTHY


def allocation_env(device_ids: Sequence[str], known: Iterable[PluginDevice]) -> dict[str, str]:
    """The container's environment for `device_ids`: NVIDIA_VISIBLE_DEVICES, the UUIDs in the
    order asked (what the NVIDIA container runtime reads to expose those GPUs)."""
    uuids = {d.uuid for d in known}
    unknown = [i for i in device_ids if i not in uuids]
    if unknown:
        raise UnknownDevices(
            f"unknown device IDs {', '.join(unknown)}: this plugin advertises "
            f"{', '.join(sorted(uuids)) or 'no devices'}"
        )
    return {VISIBLE_DEVICES_ENV: ",".join(device_ids)}


def preferred(
    available: Sequence[str],
    must_include: Sequence[str],
    size: int,
    known: Iterable[PluginDevice],
) -> list[str]:
    """The kubelet's `must_include` first, then the lowest-indexed available GPUs up to `size`.

    Lowest index first packs a node from one end, so the GPUs left free stay contiguous (on
    NVSwitch systems every pair is equal; on pairs/mesh layouts neighbours share links)."""
    order = {d.uuid: d.index for d in known}
    chosen = list(dict.fromkeys(must_include))
    rest = sorted(
        (u for u in available if u not in chosen), key=lambda u: (order.get(u, 1 << 30), u)
    )
    return (chosen + rest)[: max(size, len(chosen))]
