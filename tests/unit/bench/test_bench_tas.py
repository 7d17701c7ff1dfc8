"""The topology scenarios: the reference's tas shape (counts, classes, placements, the fleet), its
GPU variant, the checks that refuse a mistaken scenario, and the ratios to a baseline run."""

from __future__ import annotations

import dataclasses
import json
from collections import Counter
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from bench.cluster import cli, fleet, ratios, report
from bench.cluster import results as figures
from bench.cluster.objects import LABEL_BENCH, Layout, flavor, nodes, topology, workload
from bench.cluster.procstat import ProcSample
from bench.cluster.record import Recorder
from bench.cluster.scenario import Scenario, load, parse
from queuectl import api, convert
from queuectl.api import names
from queuectl.core.slices import slice_problem

RACK = names.LABEL_TOPOLOGY_RACK


def per_queue(scenario: Scenario, size: str) -> int:
    return sum(s.count for s in scenario.streams if s.size_class == size)


def test_tas_is_baselines_queue_tree_and_work_split_over_pods_and_placements() -> None:
    tas, base = load("tas"), load("baseline")
    assert (tas.cohorts, tas.queues_per_cohort, tas.workloads) == (5, 6, 15_000)
    assert tas.queue == base.queue
    assert tas.work_unit_seconds == base.work_unit_seconds  # the same work, placed on nodes
    for size, pods, request in (
        ("small", 2, "500m"),
        ("medium", 4, "1250m"),
        ("large", 8, "2500m"),
    ):
        streams = [s for s in tas.streams if s.size_class == size]
        assert per_queue(tas, size) == base.stream(size).count  # 350, 100, 50
        assert {s.units for s in streams} == {base.stream(size).units}  # 1, 5, 20 cpu a Workload
        assert {(s.pods, s.pod_request()) for s in streams} == {(pods, request)}
        modes = {s.placement.mode: s.placement for s in streams if s.placement}
        assert set(modes) == {"required", "preferred", "balanced"}  # a third each
        assert max(s.count for s in streams) - min(s.count for s in streams) <= 10
        assert modes["required"].required == "rack"
        assert modes["preferred"].preferred == "rack"
        slices = {"small": 1, "medium": 2, "large": 4}[size]
        assert modes["balanced"].slices == (("rack", slices),)


def test_tas_flat_is_tas_with_no_nodes_and_no_placement_so_the_two_tell_placement_apart() -> None:
    tas, flat = load("tas"), load("tas-flat")
    assert flat.fleet is None and all(s.placement is None for s in flat.streams)
    assert flat.queue == tas.queue and flat.ratio_targets == tas.ratio_targets
    unplaced = [dataclasses.replace(s, placement=None) for s in tas.streams]
    assert list(flat.streams) == unplaced  # the same arrivals, pods and priorities


def test_tas_fleet_is_one_block_of_ten_racks_of_64_nodes() -> None:
    lay = Layout(load("tas"), "tas-abc123")
    made = nodes(lay)
    assert len(made) == 640 == len({n["metadata"]["name"] for n in made})
    racks = Counter(n["metadata"]["labels"][RACK] for n in made)
    assert len(racks) == 10 and set(racks.values()) == {64}
    assert {n["metadata"]["labels"][names.LABEL_TOPOLOGY_BLOCK] for n in made} == {"tas-abc123-b0"}
    for n in made:
        labels = n["metadata"]["labels"]
        assert labels[names.LABEL_HOSTNAME] == n["metadata"]["name"]
        assert labels[LABEL_BENCH] == "tas-abc123"  # what the run's flavor selects
        assert n["metadata"]["annotations"] == {names.ANNOTATION_KWOK_NODE: names.KWOK_NODE_FAKE}
        assert n["status"]["allocatable"] == {"cpu": "96", "memory": "256Gi", "pods": "110"}
    assert flavor(lay)["spec"] == {
        "nodeLabels": {LABEL_BENCH: "tas-abc123"},
        "topologyName": "tas-abc123-topology",
    }
    assert [lv["nodeLabel"] for lv in topology(lay)["spec"]["levels"]] == [
        names.LABEL_TOPOLOGY_BLOCK, RACK, names.LABEL_HOSTNAME,
    ]  # fmt: skip


@pytest.mark.parametrize("name", ["tas", "tas-gpu", "tas-smoke"])
def test_every_workload_is_one_the_api_and_the_core_accept(name: str) -> None:
    scenario = load(name)
    assert scenario.fleet is not None
    lay = Layout(scenario, "run-1")
    api.Topology.model_validate(topology(lay))
    api.ResourceFlavor.model_validate(flavor(lay))
    levels = [lv.label for lv in scenario.fleet.levels]
    for stream in scenario.streams:
        obj = workload(lay, 0, 1, stream, 7)
        api.Workload.model_validate(obj)  # the CRD's rules, in the model's words
        pod_set = convert.podset(obj["spec"]["podSets"][0])
        assert pod_set.count == stream.pods
        assert pod_set.topology is not None
        if pod_set.topology.slices:
            assert slice_problem(pod_set.topology, levels, pod_set.count) is None
        assert obj["metadata"]["labels"]["bench.queuectl.io/class"] == stream.cls


def test_a_balanced_class_asks_for_slices_per_rack_and_balance() -> None:
    lay = Layout(load("tas"), "r")
    stream = lay.scenario.stream("large-balanced-rack")
    pod_set = workload(lay, 0, 0, stream, 0)["spec"]["podSets"][0]
    assert pod_set["count"] == 8
    assert pod_set["template"]["spec"]["containers"][0]["resources"] == {
        "requests": {"cpu": "2500m"}
    }
    assert pod_set["topologyRequest"] == {
        "podSetSliceRequiredTopologyConstraints": [{"topology": RACK, "size": 4}],
        "balancedPlacement": True,
    }
    required = workload(lay, 0, 0, lay.scenario.stream("small-required-rack"), 0)
    assert required["spec"]["podSets"][0]["topologyRequest"] == {"required": RACK}


def test_the_gpu_variant_is_8_gpu_nodes_whose_gpus_are_the_quota() -> None:
    gpu = load("tas-gpu")
    assert gpu.fleet is not None and gpu.workloads == 15_000
    assert [lv.name for lv in gpu.fleet.levels] == ["block", "rack", "domain", "node"]
    assert gpu.fleet.label("domain") == names.LABEL_GPU_CLIQUE
    assert gpu.fleet.capacity[names.GPU_RESOURCE] == "8"
    assert gpu.fleet.nodes * 8 == gpu.nominal_total == 1920
    assert sorted({s.units for s in gpu.streams}) == [8, 32, 64]  # GPUs a gang
    large = gpu.stream("large-balanced-block").placement
    assert large is not None and large.required == "block"
    assert large.slices == (("rack", 4), ("domain", 2))  # 32 GPUs a rack, 16 a NVLink domain


BASE = {
    "queue": {"nominalQuota": 20},
    "cohorts": 1,
    "queuesPerCohort": 1,
    "nodes": {
        "levels": [
            {"name": "rack", "label": RACK, "count": 2},
            {"name": "node", "label": names.LABEL_HOSTNAME, "count": 2},
        ],
        "capacity": {"cpu": "8"},
    },
}
STREAM = {"class": "s", "count": 1, "units": 4, "pods": 4, "runtimeMs": 1, "priority": 1}


@pytest.mark.parametrize(
    ("change", "stream_change", "says"),
    [
        ({}, {"topology": {"required": "zone"}}, "no level 'zone'"),
        ({}, {"topology": {"required": "rack", "preferred": "rack"}}, "not both"),
        ({}, {"units": 1, "pods": 3}, "do not split evenly"),  # 333.3m
        ({}, {"topology": {"slices": [{"level": "node", "size": 3}]}}, "whole number of slices"),
        (
            {},
            {"topology": {"slices": [{"level": "rack", "size": 2}, {"level": "node", "size": 4}]}},
            "each dividing",
        ),
        (
            {},
            {"topology": {"slices": [{"level": "node", "size": 2}, {"level": "rack", "size": 4}]}},
            "outermost first",
        ),
        ({}, {"topology": {"required": "node", "slices": [{"level": "rack", "size": 2}]}}, "finer"),
        ({"nodes": None}, {"topology": {"required": "rack"}}, "needs a `nodes` fleet"),
        (
            {
                "nodes": {
                    "levels": [{"name": "rack", "label": RACK, "count": 1}],
                    "capacity": {"cpu": "8"},
                }
            },
            {},
            "must be the nodes themselves",
        ),
        ({"resource": "nvidia.com/gpu"}, {}, "must offer the scenario's resource"),
    ],
)
def test_a_mistaken_scenario_is_refused_with_the_reason(
    change: dict[str, Any], stream_change: dict[str, Any], says: str
) -> None:
    raw = {"name": "x", **BASE, **change, "streams": [{**STREAM, **stream_change, "intervalMs": 1}]}
    with pytest.raises(ValueError, match=says):
        parse(raw)


def test_a_level_value_names_its_whole_path_so_no_two_racks_share_one() -> None:
    gpu = load("tas-gpu")
    assert gpu.fleet is not None
    values = {fleet.domain_value("r", gpu.fleet, p[:2]) for p in gpu.fleet.paths()}
    assert len(values) == 10  # 2 blocks x 5 racks
    assert fleet.domain_value("r", gpu.fleet, (1, 4, 5, 3)) == "r-b1-r4-d5-n3"


# --- results and ratios -------------------------------------------------------------------
def a_tas_run(tta: dict[str, float], name: str = "tas") -> dict[str, Any]:
    """A made-up tas run: one Workload per class, admitted after `tta[size]` seconds."""
    scenario = load(name)
    rec = Recorder(scenario.nominal_total)
    for stream in scenario.streams:
        rec.add(stream.cls, stream.cls, stream.units, stream.size_class)
        rec.created(stream.cls, 0.0)
        rec.admitted(stream.cls, tta[stream.size_class])
        rec.api_admission(stream.cls, 1000.0, 1000.0 + tta[stream.size_class])
        rec.stopped(stream.cls, 50.0, finished=True)
    driver = SimpleNamespace(
        creation_lag_max=0.0, finish_latencies=[0.1], retries=0, conflicts=0, watch_events=9,
        evicted_after_runtime=0, topology_admissions=9, domains_used={1: 5, 2: 4},
    )  # fmt: skip
    proc: dict[str, ProcSample | None] = {"controller": ProcSample(1.0, 100.0, 120.0)}
    calls = Counter({("workloads/status", "PATCH"): 30, ("leases", "PUT"): 12})
    return figures.results(
        scenario, rec, driver, "2026-11-27T00:00:00Z", 1.0, 0.5, 10,  # type: ignore[arg-type]
        calls, proc, proc, True, [0.1],
    )  # fmt: skip


def baseline_results(tmp_path: Path, stamp: str, wall: float) -> Path:
    path = tmp_path / f"baseline-{stamp}.json"
    path.write_text(
        json.dumps(
            {
                "scenario": "baseline",
                "started_at": stamp,
                "all_finished": True,
                "wall_s": wall,
                "tta_avg_s": {"small": 10.0, "medium": 10.0, "large": 10.0},
                "tta_reference_avg_s": {"small": 9.0, "medium": 9.0, "large": 9.0},
            }
        )
    )
    return path


def test_the_newest_plain_baseline_is_the_one_compared_with(tmp_path: Path) -> None:
    baseline_results(tmp_path, "20261127T100000Z", 100.0)
    newest = baseline_results(tmp_path, "20261127T110000Z", 100.0)
    (tmp_path / "baseline-20261127T120000Z-whatif-x.json").write_text("{}")
    (tmp_path / "large-scale-20261127T130000Z.json").write_text("{}")
    assert ratios.newest(tmp_path, "baseline") == newest
    assert ratios.newest(tmp_path, "smoke") is None


def test_tas_reports_each_class_over_the_baseline_of_its_size_and_judges_it(
    tmp_path: Path,
) -> None:
    res = a_tas_run({"small": 11.0, "medium": 13.0, "large": 12.0})
    scenario = load("tas")
    path = baseline_results(tmp_path, "20261127T110000Z", 40.0)
    sizes = {s.cls: s.size_class for s in scenario.streams}
    res["ratios"] = ratios.compare(
        res, ratios.read(path), str(path), sizes, scenario.ratio_targets, scenario.peer_here
    )
    r = res["ratios"]
    assert r["wall_s"]["ours"] == 1.25 and r["wall_s"]["met"] is False  # 50 s over 40 s
    assert r["wall_s"]["reference_here"] == round(572 / 559, 3)
    assert r["tta_by_size"]["small"] == {
        "ours": 1.1, "target": 1.2, "met": True, "reference_here": round(380 / 315, 3),
    }  # fmt: skip
    assert r["tta_by_size"]["medium"]["met"] is False  # 1.3
    assert len(r["tta_by_class"]) == 9
    assert r["tta_by_class"]["large-balanced-rack"] == {
        "size": "large", "ours": 1.2, "target": 1.2, "met": True, "reference_here": None,
    }  # fmt: skip

    text = report.markdown(res)
    assert "| wall time | 1.25 | 1.15 | MISSED | 1.023 |" in text
    assert "| avg time to admission, medium | 1.3 | 1.2 | MISSED | 1.493 |" in text
    assert "large-balanced-rack (over baseline large) | 1.2 | 1.2 | met |" in text
    # the reference on this machine, beside our figures of this run and of the baseline's
    assert "| wall time of the baseline beside it (s) | 40.0 | 559 |" in text
    assert "| avg time to admission, small, as the reference defines it (s) | 11.0 | 380 |" in text
    assert (
        "| evictions | 0 | 168 |" in text and "| controller peak RSS (MB) | 120.0 | 615 |" in text
    )
    # the published CI figures in the main table
    assert "| 238-247 |" in text and "| 62.4 |" in text and "| 401 |" in text


def test_without_a_baseline_the_report_says_how_to_get_one(tmp_path: Path) -> None:
    res = a_tas_run({"small": 1.0, "medium": 1.0, "large": 1.0})
    args = SimpleNamespace(against=None, out=tmp_path)
    cli._compare(res, load("tas"), args)  # type: ignore[arg-type]
    assert res["ratios"] is None
    assert "python -m bench run baseline" in report.markdown(res)


def test_lease_and_node_requests_are_counted_apart() -> None:
    res = a_tas_run({"small": 1.0, "medium": 1.0, "large": 1.0})
    assert res["heartbeat_requests"] == 12
    assert res["api_requests_per_admission"] == round((42 - 10) / 9, 3)
    assert res["api_requests_per_admission_without_heartbeats"] == round((30 - 10) / 9, 3)
    assert res["nodes"] == 640
    assert res["topology_admissions"] == 9 and res["nodes_per_admission"] == {"1": 5, "2": 4}
    assert res["placements"]["medium-balanced-rack"] == {
        "size": "medium", "mode": "balanced", "pods": 4, "pod_request": "1250m",
    }  # fmt: skip
    assert set(res["tta_avg_s"]) == {"small", "medium", "large"}  # by size, as in baseline
    assert len(res["tta_by_class_avg_s"]) == 9


@pytest.mark.parametrize("name", ["tas", "tas-gpu"])
def test_every_target_and_published_figure_is_in_the_table(name: str) -> None:
    scenario = load(name)
    table = report.rows(a_tas_run({"small": 1.0, "medium": 1.0, "large": 1.0}, name))
    targets = {target for _, _, target, _, _ in table if target is not None}
    shown = {str(peer) for _, _, _, peer, _ in table if peer is not None}
    assert set(scenario.targets.values()) <= targets
    for key, value in scenario.peer.items():
        if key != "source":
            figures = value.values() if isinstance(value, dict) else [value]
            assert {str(v) for v in figures} <= shown, f"published figure {key} is not shown"
