"""MIG and time-slicing as the agent reports them, driven through the scripted NVML reader.

The labels are GPU Feature Discovery's (`nvidia.com/mig.strategy`, `nvidia.com/mig-1g.10gb.count`,
`-MIG-<profile>` products under the single strategy, `-SHARED` and `gpu.replicas` for time-slicing);
the extended resources are what the device plugin advertises for the same configuration.
"""

from __future__ import annotations

import json

import pytest

from queuectl.agent import health, sharing
from queuectl.agent.discovery import Inventory, read_inventory
from queuectl.agent.health import GpuState
from queuectl.agent.nodestate import NodeView, apply, desired_node, diff
from queuectl.agent.scripted import ManualClock, ScriptedReader
from queuectl.agent.sharing import Sharing
from queuectl.api import gpushare, names

NOW = 1_700_000_000.0


def inventory(model: str = "H100", count: int = 2, mig: object = None) -> Inventory:
    reader = ScriptedReader.node(model, count, "nvswitch", clock=ManualClock(), mig=mig)  # type: ignore[arg-type]
    return read_inventory(reader)


def node_labels(inv: Inventory, cfg: Sharing, current: NodeView | None = None) -> dict[str, str]:
    state = {g.uuid: GpuState(g.index, g.uuid) for g in inv.gpus}
    desired = desired_node(inv, health.summarize(state), None, shared=cfg)
    before = current or NodeView()
    return dict(apply(before, diff(before, desired, NOW)).labels)


@pytest.mark.parametrize(
    ("model", "layout", "profiles"),
    [
        ("H100", "all-1g.10gb", {"1g.10gb": 14}),
        ("H100", "all-3g.40gb", {"3g.40gb": 4}),
        ("H100", "all-balanced", {"1g.10gb": 4, "2g.20gb": 2, "3g.40gb": 2}),
        ("A100", "all-2g.20gb", {"2g.20gb": 6}),
        ("H200", "all-1g.18gb", {"1g.18gb": 14}),
    ],
)
def test_mig_devices_are_named_by_profile_as_the_device_plugin_names_them(
    model: str, layout: str, profiles: dict[str, int]
) -> None:
    inv = inventory(model, 2, layout)
    assert dict(sharing.profiles(inv.gpus, inv.mig)) == profiles


def test_mixed_strategy_labels_count_each_profile_and_advertise_one_resource_each() -> None:
    inv = inventory(mig={0: "all-1g.10gb", 1: "3g.40gb+3g.40gb"})
    labels = node_labels(inv, Sharing("mixed"))
    assert labels[names.LABEL_MIG_STRATEGY] == "mixed"
    assert labels[names.LABEL_MIG_CAPABLE] == "true"
    assert labels["nvidia.com/mig-1g.10gb.count"] == "7"
    assert labels["nvidia.com/mig-3g.40gb.count"] == "2"
    assert labels[names.LABEL_GPU_PRODUCT] == "NVIDIA-H100-80GB-HBM3"
    assert sharing.resources(inv.gpus, inv.mig, Sharing("mixed")) == {
        "nvidia.com/mig-1g.10gb": 7,
        "nvidia.com/mig-3g.40gb": 2,
    }


def test_single_strategy_makes_every_slice_a_gpu_of_a_mig_product() -> None:
    inv = inventory(mig="all-1g.10gb")
    labels = node_labels(inv, Sharing("single"))
    assert labels[names.LABEL_GPU_PRODUCT] == "NVIDIA-H100-80GB-HBM3-MIG-1g.10gb"
    assert labels[names.LABEL_GPU_COUNT] == "14"
    assert labels[names.LABEL_GPU_MEMORY] == "10240"
    assert not any(k.startswith(names.RESOURCE_MIG_PREFIX) for k in labels)
    assert sharing.resources(inv.gpus, inv.mig, Sharing("single")) == {"nvidia.com/gpu": 14}


def test_a_mig_capable_gpu_with_mig_off_is_capable_but_advertises_whole_gpus() -> None:
    inv = inventory()
    labels = node_labels(inv, Sharing("mixed"))
    assert labels[names.LABEL_MIG_CAPABLE] == "true"
    assert not any(k.endswith(".count") and "mig-" in k for k in labels)
    assert sharing.resources(inv.gpus, inv.mig, Sharing("mixed")) == {"nvidia.com/gpu": 2}


def test_a_gpu_without_mig_says_so_and_gets_no_strategy_label() -> None:
    labels = node_labels(inventory("L40S"), Sharing())
    assert labels[names.LABEL_MIG_CAPABLE] == "false"
    assert names.LABEL_MIG_STRATEGY not in labels


def test_time_slicing_shares_each_gpu_as_replicas_and_marks_the_product_shared() -> None:
    inv = inventory("L40S", 2)
    labels = node_labels(inv, Sharing(replicas=4))
    assert labels[names.LABEL_GPU_REPLICAS] == "4"
    assert labels[names.LABEL_GPU_SHARING_STRATEGY] == "time-slicing"
    assert labels[names.LABEL_GPU_PRODUCT] == "NVIDIA-L40S-SHARED"
    assert sharing.resources(inv.gpus, inv.mig, Sharing(replicas=4)) == {"nvidia.com/gpu": 8}
    renamed = Sharing(replicas=4, rename_shared=True)
    assert sharing.resources(inv.gpus, inv.mig, renamed) == {"nvidia.com/gpu.shared": 8}


def test_the_layout_annotation_places_each_device() -> None:
    inv = inventory(count=1, mig="3g.40gb+2g.20gb+1g.10gb")
    state = {g.uuid: GpuState(g.index, g.uuid) for g in inv.gpus}
    desired = desired_node(inv, health.summarize(state), None, shared=Sharing("mixed"))
    layout = json.loads(desired.annotations[names.ANNOTATION_MIG_LAYOUT] or "")
    assert layout == {
        "v": 1,
        "gpus": {"0": [["3g.40gb", 0, 4], ["2g.20gb", 4, 2], ["1g.10gb", 6, 1]]},
    }


def test_a_repartitioned_node_loses_the_labels_of_profiles_it_no_longer_has() -> None:
    before = node_labels(inventory(mig="all-1g.10gb"), Sharing("mixed"))
    after = node_labels(inventory(mig="all-3g.40gb"), Sharing("mixed"), NodeView(labels=before))
    assert "nvidia.com/mig-1g.10gb.count" not in after
    assert after["nvidia.com/mig-3g.40gb.count"] == "4"


def test_a_scenario_file_carries_the_mig_layout() -> None:
    reader = ScriptedReader.from_scenario(
        {"model": "A100", "count": 1, "mig": "all-3g.40gb"}, ManualClock()
    )
    inv = read_inventory(reader)
    assert dict(sharing.profiles(inv.gpus, inv.mig)) == {"3g.40gb": 2}


@pytest.mark.parametrize(
    ("layout", "problem"),
    [
        ("all-9g.90gb", "does not fit"),
        ("3g.40gb+3g.40gb+3g.40gb", "does not fit one GPU"),
        ("big", "is not"),
    ],
)
def test_a_bad_layout_is_refused_with_what_to_write(layout: str, problem: str) -> None:
    with pytest.raises(ValueError, match=problem):
        gpushare.parse_layout(layout, 80)
