"""Discovery scenarios: the labels a node gets for its GPUs, the class of its NVLink layout."""

from __future__ import annotations

import json
from dataclasses import replace
from itertools import combinations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from queuectl.agent import discovery
from queuectl.agent.discovery import Inventory, read_inventory
from queuectl.agent.reader import FabricInfo, PairTopology, PcieLevel
from queuectl.agent.scripted import ManualClock, ScriptedReader, make_gpus, make_pairs
from queuectl.api import names


def inventory(
    model: str = "H100",
    count: int = 8,
    topology: str = "nvswitch",
    fabric: FabricInfo | None = None,
) -> Inventory:
    reader = ScriptedReader.node(model, count, topology, clock=ManualClock(), fabric=fabric)
    return read_inventory(reader)


def test_an_hgx_h100_node_gets_the_gfd_labels_a_kubernetes_user_expects() -> None:
    labels = discovery.gfd_labels(inventory("H100", 8, "nvswitch"))
    assert labels == {
        names.LABEL_GPU_PRODUCT: "NVIDIA-H100-80GB-HBM3",
        names.LABEL_GPU_COUNT: "8",
        names.LABEL_GPU_MEMORY: "81559",
        names.LABEL_GPU_FAMILY: "hopper",
        names.LABEL_GPU_COMPUTE_MAJOR: "9",
        names.LABEL_GPU_COMPUTE_MINOR: "0",
    }


def test_a_node_in_a_registered_nvlink_fabric_carries_its_clique() -> None:
    fabric = FabricInfo("6b1e4c9a-0d2f-4f4e-9a55-0c3b8f1d2e77", 7)
    labels = discovery.gfd_labels(inventory("B200", 4, "nvswitch", fabric=fabric))
    assert labels[names.LABEL_GPU_CLIQUE] == "6b1e4c9a-0d2f-4f4e-9a55-0c3b8f1d2e77.7"
    assert labels[names.LABEL_GPU_FAMILY] == "blackwell"


def test_a_node_without_gpus_gets_no_gfd_labels() -> None:
    assert discovery.gfd_labels(Inventory(())) == {}


@pytest.mark.parametrize(
    ("cc", "family"),
    [
        ((9, 0), "hopper"),
        ((8, 0), "ampere"),
        ((8, 6), "ampere"),
        ((8, 9), "ada-lovelace"),
        ((10, 0), "blackwell"),
        ((12, 0), "blackwell"),
        ((7, 0), "volta"),
        ((7, 5), "turing"),
        ((6, 0), "pascal"),
        (None, "undefined"),
        ((42, 0), "undefined"),
    ],
)
def test_family_follows_compute_capability(cc: tuple[int, int] | None, family: str) -> None:
    assert discovery.family(cc) == family


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("NVIDIA H100 80GB HBM3", "NVIDIA-H100-80GB-HBM3"),
        ("NVIDIA A100-SXM4-80GB", "NVIDIA-A100-SXM4-80GB"),
        ("NVIDIA GeForce RTX 4090 (rev a1)", "NVIDIA-GeForce-RTX-4090-rev-a1"),
        ("  Tesla T4 ", "Tesla-T4"),
        ("X" * 80, "X" * 63),
    ],
)
def test_product_names_become_valid_label_values(name: str, value: str) -> None:
    assert discovery.label_value(name) == value


@pytest.mark.parametrize(
    ("count", "topology", "expected"),
    [
        (8, "nvswitch", names.NVLINK_CLASS_NVSWITCH),
        (4, "full-mesh", names.NVLINK_CLASS_FULL_MESH),
        (8, "pairs", names.NVLINK_CLASS_PAIRS),
        (2, "pairs", names.NVLINK_CLASS_FULL_MESH),  # one bridged pair is every pair there is
        (8, "ring", names.NVLINK_CLASS_PARTIAL_MESH),
        (8, "none", names.NVLINK_CLASS_NONE),
        (1, "nvswitch", names.NVLINK_CLASS_NONE),
    ],
)
def test_nvlink_matrices_give_the_right_class(count: int, topology: str, expected: str) -> None:
    assert discovery.nvlink_class(inventory("A100", count, topology)) == expected


def test_p2p_over_nvlink_without_a_link_count_still_counts_as_nvlink() -> None:
    gpus = tuple(make_gpus("H100", 2))
    inv = Inventory(gpus, (PairTopology(0, 1, p2p_nvlink=True, pcie=PcieLevel.SYS),))
    assert discovery.nvlink_class(inv) == names.NVLINK_CLASS_FULL_MESH
    assert json.loads(discovery.topology_matrix(inv))["matrix"] == [["X", "NV"], ["NV", "X"]]


@settings(max_examples=60, deadline=None)
@given(
    st.integers(2, 8).flatmap(
        lambda n: st.tuples(st.just(n), st.sets(st.sampled_from(list(combinations(range(n), 2)))))
    )
)
def test_the_class_agrees_with_the_link_graph(case: tuple[int, set[tuple[int, int]]]) -> None:
    count, linked = case
    pairs = tuple(
        PairTopology(a, b, 4 if (a, b) in linked else 0, pcie=PcieLevel.PHB)
        for a, b in combinations(range(count), 2)
    )
    cls = discovery.nvlink_class(Inventory(tuple(make_gpus("A100", count)), pairs))
    degrees = [sum(1 for p in linked if i in p) for i in range(count)]
    if not linked:
        assert cls == names.NVLINK_CLASS_NONE
    elif len(linked) == count * (count - 1) // 2:
        assert cls == names.NVLINK_CLASS_FULL_MESH
    elif max(degrees) == 1:
        assert cls == names.NVLINK_CLASS_PAIRS
    else:
        assert cls == names.NVLINK_CLASS_PARTIAL_MESH


def test_the_topology_matrix_is_compact_json_in_nvidia_smi_words() -> None:
    text = discovery.topology_matrix(inventory("A100", 4, "pairs"))
    assert " " not in text
    body = json.loads(text)
    assert body["gpus"] == [0, 1, 2, 3]
    assert body["matrix"] == [
        ["X", "NV12", "SYS", "SYS"],
        ["NV12", "X", "SYS", "SYS"],
        ["SYS", "SYS", "X", "NV12"],
        ["SYS", "SYS", "NV12", "X"],
    ]


def test_a_gpu_that_does_not_answer_is_left_out_of_discovery() -> None:
    clock = ManualClock()
    reader = ScriptedReader(make_gpus("H100", 4), make_pairs("nvswitch", 4), clock)
    reader.stop_answering(clock.now, 2)
    inv = read_inventory(reader)
    assert [g.index for g in inv.gpus] == [0, 1, 3]
    assert {(p.a, p.b) for p in inv.pairs} == {(0, 1), (0, 3), (1, 3)}


def test_a_gpu_that_will_not_tell_its_memory_gets_no_memory_label() -> None:
    (gpu,) = make_gpus("H100", 1)
    inv = Inventory((replace(gpu, memory_total_bytes=0),))
    assert names.LABEL_GPU_MEMORY not in discovery.gfd_labels(inv)
