"""The real NVML reader over a stand-in pynvml: per-call errors stay per call, a missing NVML is a
status, and NVLink ends are matched to GPUs or recognised as NVSwitches."""

from __future__ import annotations

import pynvml
import pytest
from agent_fake_nvml import FakeGpu, FakeNvml

from queuectl.agent.discovery import nvlink_class, read_inventory
from queuectl.agent.nvml import NvmlReader, normalize_bus_id
from queuectl.agent.reader import EventKind, GpuEvent, GpuNotAnswering, NvmlUnavailable, PcieLevel
from queuectl.api import names

BUS = ["00000000:18:00.0", "00000000:2A:00.0"]
SWITCH = "00000000:B0:00.0"


def two_gpus(**second: object) -> FakeNvml:
    return FakeNvml(
        [
            FakeGpu(uuid="GPU-0", bus_id=BUS[0], nvlink_remotes=[BUS[1].lower()] * 4),
            FakeGpu(uuid="GPU-1", bus_id=BUS[1], nvlink_remotes=["0000:18:00.0"] * 4, **second),  # type: ignore[arg-type]
        ]
    )


def opened(nv: FakeNvml) -> NvmlReader:
    reader = NvmlReader(nv)
    assert reader.open() is None
    return reader


def test_discovery_reads_names_memory_capability_and_direct_nvlinks() -> None:
    inv = read_inventory(opened(two_gpus()))
    assert [(g.uuid, g.name, g.compute_capability, g.fabric) for g in inv.gpus] == [
        ("GPU-0", "NVIDIA H100 80GB HBM3", (9, 0), None),
        ("GPU-1", "NVIDIA H100 80GB HBM3", (9, 0), None),
    ]
    (pair,) = inv.pairs
    assert (pair.nvlinks, pair.via_switch, pair.p2p_nvlink, pair.pcie) == (
        4,
        False,
        True,
        PcieLevel.SYS,
    )
    assert nvlink_class(inv) == names.NVLINK_CLASS_FULL_MESH


def test_links_that_end_on_something_else_than_a_gpu_are_nvswitch_links() -> None:
    nv = FakeNvml(
        [FakeGpu(uuid=f"GPU-{i}", bus_id=BUS[i], nvlink_remotes=[SWITCH] * 18) for i in range(2)]
    )
    (pair,) = read_inventory(opened(nv)).pairs
    assert (pair.nvlinks, pair.via_switch) == (18, True)


def test_an_unsupported_query_leaves_one_field_empty_not_the_pass() -> None:
    reader = opened(two_gpus(unsupported={"temperature", "ecc", "remap"}))
    sample = reader.sample(1)
    assert (sample.temperature_c, sample.ecc_dbe_volatile, sample.row_remap_pending) == (
        None,
        None,
        None,
    )
    assert (sample.power_w, sample.utilization_ratio, sample.memory_used_bytes) == (
        350.5,
        0.87,
        1024,
    )
    assert reader.sample(0).temperature_c == 45.0


def test_a_lost_gpu_is_not_answering_and_the_others_still_are() -> None:
    nv = two_gpus()
    reader = opened(nv)
    nv.gpus[1].lost = True
    with pytest.raises(GpuNotAnswering):
        reader.sample(1)
    with pytest.raises(GpuNotAnswering):
        reader.device(1)
    assert reader.sample(0).uuid == "GPU-0"


def test_a_gpu_that_answers_nothing_is_not_answering() -> None:
    everything = {"memory", "util", "power", "retired", "remap", "ecc", "temperature"}
    reader = opened(two_gpus(unsupported=everything))
    with pytest.raises(GpuNotAnswering):
        reader.sample(1)


@pytest.mark.parametrize(
    "error", [pynvml.NVML_ERROR_LIBRARY_NOT_FOUND, pynvml.NVML_ERROR_DRIVER_NOT_LOADED]
)
def test_no_nvml_is_a_status_not_an_exception(error: int) -> None:
    status = NvmlReader(FakeNvml([], init_error=error)).open()
    assert isinstance(status, NvmlUnavailable)
    assert "NVML cannot be initialized" in status.reason


def test_no_gpus_is_unavailable_too() -> None:
    nv = FakeNvml([])
    status = NvmlReader(nv).open()
    assert isinstance(status, NvmlUnavailable) and "no GPUs" in status.reason
    assert nv.shutdown_called


def test_the_real_library_is_missing_on_this_machine() -> None:
    """This test machine has no NVIDIA driver: the real pynvml path must say so, not raise."""
    status = NvmlReader().open()
    assert isinstance(status, NvmlUnavailable)


def test_events_are_drained_and_an_unknown_device_counts_against_every_gpu() -> None:
    nv = two_gpus()
    reader = opened(nv)
    nv.events = [
        (1, pynvml.nvmlEventTypeXidCriticalError, 79),
        (0, pynvml.nvmlEventTypeDoubleBitEccError, 0),
        (-1, pynvml.nvmlEventTypeXidCriticalError, 48),
    ]
    assert reader.wait_events(0.01) == [
        GpuEvent("GPU-1", EventKind.XID, 79),
        GpuEvent("GPU-0", EventKind.DOUBLE_BIT_ECC),
        GpuEvent("GPU-0", EventKind.XID, 48),
        GpuEvent("GPU-1", EventKind.XID, 48),
    ]
    assert reader.wait_events(0.01) == []


@pytest.mark.parametrize(
    ("raw", "norm"),
    [
        ("0000:18:00.0", "00000000:18:00.0"),
        (b"00000000:2a:00.0", "00000000:2A:00.0"),
        ("odd", "ODD"),
    ],
)
def test_bus_ids_have_one_spelling(raw: str | bytes, norm: str) -> None:
    assert normalize_bus_id(raw) == norm
