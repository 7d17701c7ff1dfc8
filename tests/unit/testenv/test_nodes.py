"""Fake GPU nodes: layout over blocks and racks, and the labels and capacity they carry."""

from __future__ import annotations

import math
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from queuectl.api import names
from queuectl.testenv.nodes import A100, H100, GpuNodeSpec, layout, node_manifest


@pytest.mark.parametrize(
    ("count", "blocks", "racks", "expected_racks"),
    [
        (1, 1, 1, {"gpu-b0-r0": 1}),
        (8, 2, 2, {"gpu-b0-r0": 2, "gpu-b0-r1": 2, "gpu-b1-r0": 2, "gpu-b1-r1": 2}),
        (5, 1, 2, {"gpu-b0-r0": 3, "gpu-b0-r1": 2}),
        (3, 2, 1, {"gpu-b0-r0": 2, "gpu-b1-r0": 1}),
    ],
)
def test_nodes_fill_rack_after_rack(
    count: int, blocks: int, racks: int, expected_racks: dict[str, int]
) -> None:
    nodes = layout(GpuNodeSpec(count, blocks=blocks, racks_per_block=racks))
    assert Counter(n.rack for n in nodes) == expected_racks


@settings(max_examples=60, deadline=None)
@given(
    count=st.integers(0, 200),
    blocks=st.integers(1, 6),
    racks=st.integers(1, 6),
)
def test_layout_invariants(count: int, blocks: int, racks: int) -> None:
    nodes = layout(GpuNodeSpec(count, blocks=blocks, racks_per_block=racks))
    assert len(nodes) == count
    assert len({n.name for n in nodes}) == count
    assert all(n.rack.startswith(n.block + "-") for n in nodes)
    per_rack = Counter(n.rack for n in nodes)
    assert len(per_rack) <= blocks * racks
    assert all(c <= max(1, math.ceil(count / (blocks * racks))) for c in per_rack.values())


def test_a_gpu_node_looks_like_gfd_labelled_it() -> None:
    spec = GpuNodeSpec(1, gpus_per_node=8, product=H100, memory_mib=81559, name_prefix="h")
    (node,) = layout(spec)
    manifest = node_manifest(node, spec)
    labels = manifest["metadata"]["labels"]
    assert labels[names.LABEL_GPU_PRODUCT] == H100
    assert labels[names.LABEL_GPU_COUNT] == "8"
    assert labels[names.LABEL_GPU_MEMORY] == "81559"
    assert labels[names.LABEL_GPU_FAMILY] == "hopper"
    assert labels[names.LABEL_TOPOLOGY_BLOCK] == "h-b0"
    assert labels[names.LABEL_TOPOLOGY_RACK] == "h-b0-r0"
    assert labels[names.LABEL_HOSTNAME] == "h-0"
    assert manifest["metadata"]["annotations"] == {names.ANNOTATION_KWOK_NODE: names.KWOK_NODE_FAKE}
    for part in ("capacity", "allocatable"):
        assert manifest["status"][part][names.GPU_RESOURCE] == "8"
        assert {"cpu", "memory", "pods"} <= set(manifest["status"][part])


def test_a_cpu_only_node_has_no_gpu_labels_or_capacity() -> None:
    spec = GpuNodeSpec(1, gpus_per_node=0, product=A100)
    manifest = node_manifest(layout(spec)[0], spec)
    assert names.GPU_RESOURCE not in manifest["status"]["capacity"]
    assert names.LABEL_GPU_PRODUCT not in manifest["metadata"]["labels"]


@pytest.mark.parametrize(
    "bad", [dict(count=-1), dict(count=1, blocks=0), dict(count=1, racks_per_block=0)]
)
def test_nonsense_shapes_are_refused(bad: dict[str, int]) -> None:
    with pytest.raises(ValueError):
        GpuNodeSpec(**bad)  # type: ignore[arg-type]


def test_a_mig_node_advertises_slices_under_the_mixed_strategy_not_gpus() -> None:
    from queuectl.testenv.nodes import GpuNodeSpec, layout, node_manifest

    spec = GpuNodeSpec(count=1, gpus_per_node=2, name_prefix="mig", mig_layout="all-1g.10gb")
    node = node_manifest(layout(spec)[0], spec)
    labels, allocatable = node["metadata"]["labels"], node["status"]["allocatable"]
    assert allocatable["nvidia.com/mig-1g.10gb"] == "14"
    assert "nvidia.com/gpu" not in allocatable
    assert labels["nvidia.com/mig.strategy"] == "mixed"
    assert labels["nvidia.com/mig-1g.10gb.count"] == "14"


def test_a_time_sliced_node_advertises_replicas_and_a_shared_product() -> None:
    from queuectl.testenv.nodes import GpuNodeSpec, layout, node_manifest

    spec = GpuNodeSpec(count=1, gpus_per_node=8, name_prefix="shared", replicas=4)
    node = node_manifest(layout(spec)[0], spec)
    labels = node["metadata"]["labels"]
    assert node["status"]["allocatable"]["nvidia.com/gpu"] == "32"
    assert labels["nvidia.com/gpu.replicas"] == "4"
    assert labels["nvidia.com/gpu.sharing-strategy"] == "time-slicing"
    assert labels["nvidia.com/gpu.product"].endswith("-SHARED")
