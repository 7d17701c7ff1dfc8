"""`describe` and `list` over in-memory objects: the text a user reads, computed by the core.

The scenario (cli_objects.research_tree): cohort `research` pools vision's 16 H100 and llm's 8;
llm runs 16 (8 borrowed from vision), vision runs 8. Nothing is free in the cohort.
"""

from __future__ import annotations

import re

import cli_objects as o
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from queuectl.api import names
from queuectl.cli import describe, listing
from queuectl.cli._render import Term
from queuectl.cli._snapshot import Snapshot

PLAIN = Term(color=False, width=0)


def snapshot(*extra: o.Obj, reclaim: bool = False) -> Snapshot:
    objs = o.research_tree()
    if reclaim:
        objs["clusterqueues"][0]["spec"]["preemption"] = {"reclaimWithinCohort": "Any"}
    objs["workloads"] += list(extra)
    return Snapshot.from_objects(objs, now=o.NOW)


def test_pending_gang_names_resource_flavor_shortfall_and_holders() -> None:
    snap = snapshot(o.workload("team-llm", "gang", "training", 8, count=2))
    text = describe.describe(snap, "workload", "gang", "team-llm", PLAIN)
    assert "Reason:      WaitingForQuota" in text
    assert "Missing:     needs 16 nvidia.com/gpu of flavor h100, 0 available: 16 short" in text
    assert "Held by:     llm uses 16 (8 borrowed); vision uses 8" in text
    assert "Preemption:  cannot help" in text
    assert "Position:     1 of 1 in ClusterQueue llm" in text


def test_reclaim_says_whom_it_would_evict() -> None:
    snap = snapshot(o.workload("team-vision", "big", "default", 8), reclaim=True)
    text = describe.describe(snap, "workload", "big", "team-vision", PLAIN)
    assert "Preemption:  would admit it by evicting team-llm/l-run" in text


def test_a_preemptor_the_controller_lets_wait_for_completions_says_so() -> None:
    big = o.workload("team-vision", "big", "default", 8)
    big["status"] = {
        "conditions": [
            {
                "type": names.COND_QUOTA_RESERVED,
                "status": "False",
                "reason": names.REASON_WAITING_FOR_QUOTA,
                "message": "finished work in its cohort returned enough quota recently: it "
                "waits for that instead of preempting 1 workload(s), holding what is freed "
                "meanwhile; if it still does not fit after 5s of waiting, it preempts",
            }
        ]
    }
    text = describe.describe(snapshot(big, reclaim=True), "workload", "big", "team-vision", PLAIN)
    assert "Preemption:  would admit it by evicting team-llm/l-run" in text
    assert "Patience:    the controller waits for finishing work first" in text


def test_cluster_queue_quota_table_shows_borrowed_and_lent() -> None:
    text = describe.describe(snapshot(), "clusterqueue", "llm", "", PLAIN)
    row = next(line for line in text.splitlines() if line.startswith("h100"))
    # FLAVOR RESOURCE NOMINAL BORROWING LENDING USED BORROWED LENT
    assert row.split() == ["h100", "nvidia.com/gpu", "8", "unlimited", "all", "16", "8", "0"]
    vision = describe.describe(snapshot(), "clusterqueue", "vision", "", PLAIN)
    row = next(line for line in vision.splitlines() if line.startswith("h100"))
    assert row.split()[-3:] == ["8", "0", "8"]  # uses 8, borrows nothing, lends 8 to llm
    assert "team-llm/l-run" not in vision
    assert "team-vision/v-run" in vision


def test_cluster_queue_shows_its_gpu_time_bank() -> None:
    objs = o.research_tree()
    vision = objs["clusterqueues"][0]
    vision["spec"]["gpuTimeBank"] = {"accrualRate": 0.5, "capGPUHours": 64, "halfLifeHours": 24}
    vision["status"] = {
        "gpuTimeBank": {"balanceGPUHours": 12.5, "lastUpdateTime": "2025-01-01T00:00:00Z"}
    }
    text = describe.describe(
        Snapshot.from_objects(objs, now=o.NOW), "clusterqueue", "vision", "", PLAIN
    )
    assert (
        "GPU time bank: 12.50 of 64 GPU-hours (borrows first, reclaimed last); earns 0.5/h per "
        "idle nominal GPU, half-life 24 h; written 2025-01-01T00:00:00Z"
    ) in text
    assert "GPU time bank" not in describe.describe(snapshot(), "clusterqueue", "llm", "", PLAIN)


def test_cohort_lists_members_and_their_borrowing() -> None:
    text = describe.describe(snapshot(), "cohort", "research", "", PLAIN)
    assert "ClusterQueues: llm, vision" in text
    assert re.search(r"^llm\s+Active\s+0\s+1\s+8 nvidia.com/gpu@h100$", text, re.M)


def test_local_queue_shows_usage_and_both_positions() -> None:
    snap = snapshot(
        o.workload("team-vision", "a", "default", 4, created=o.NOW - 100),
        o.workload("team-vision", "b", "default", 4, created=o.NOW - 200),
    )
    text = describe.describe(snap, "localqueue", "default", "team-vision", PLAIN)
    assert re.search(r"^h100\s+nvidia.com/gpu\s+8$", text, re.M)
    assert re.search(r"^1\s+1\s+team-vision/b\s", text, re.M)
    assert re.search(r"^2\s+2\s+team-vision/a\s", text, re.M)


def test_withheld_workload_explains_the_stopped_local_queue() -> None:
    objs = o.research_tree()
    objs["localqueues"][1]["spec"]["stopPolicy"] = "Hold"
    objs["workloads"].append(o.workload("team-llm", "held", "training", 1))
    snap = Snapshot.from_objects(objs, now=o.NOW)
    text = describe.describe(snap, "workload", "held", "team-llm", PLAIN)
    assert "Reason:      LocalQueueStopped" in text
    assert "ClusterQueue: llm" in text


def test_a_missing_priority_class_is_named_with_what_to_do() -> None:
    objs = o.research_tree()
    wl = o.workload("team-llm", "typo", "training", 1)
    wl["spec"]["priorityClassName"] = "urgnet"
    del wl["spec"]["priority"]  # the class did not exist when the job was queued
    objs["workloads"].append(wl)
    snap = Snapshot.from_objects(objs, now=o.NOW)
    text = describe.describe(snap, "workload", "typo", "team-llm", PLAIN)
    assert "not resolved (urgnet did not exist when the job was queued)" in text
    assert "Reason:      WorkloadPriorityClassNotFound" in text
    assert "WorkloadPriorityClass urgnet does not exist; create it" in text


def test_list_workloads_positions_follow_priority_then_age() -> None:
    snap = snapshot(
        o.workload("team-vision", "old", "default", 1, created=o.NOW - 900),
        o.workload("team-vision", "urgent", "default", 1, priority=100, created=o.NOW - 5),
        o.workload("team-vision", "new", "default", 1, created=o.NOW - 60),
        o.workload("team-vision", "off", "default", 1, active=False),
    )
    rows = listing.collect(snap, "workload", "team-vision", status="pending")
    assert [(r["name"], r["position"]) for r in rows] == [
        ("urgent", 1),
        ("old", 2),
        ("new", 3),
        ("off", None),
    ]
    assert rows[-1]["status"] == "Inactive"
    text = listing.render("workload", rows, None, PLAIN, all_namespaces=False)
    assert text.splitlines()[0].split()[:5] == [
        "NAME",
        "QUEUE",
        "CLUSTERQUEUE",
        "STATUS",
        "POSITION",
    ]


@pytest.mark.parametrize(
    ("filters", "names"),
    [
        ({"status": "admitted"}, ["l-run", "v-run"]),
        ({"status": "pending"}, ["p"]),
        ({"queue": "training"}, ["l-run"]),
        ({"cluster_queue": "vision"}, ["p", "v-run"]),
    ],
)
def test_list_workload_filters(filters: dict[str, str], names: list[str]) -> None:
    snap = snapshot(o.workload("team-vision", "p", "default", 1))
    rows = listing.collect(snap, "workload", None, **filters)
    assert sorted(r["name"] for r in rows) == names


def test_list_cluster_queues_and_flavors_report_gpu_figures() -> None:
    snap = snapshot()
    cqs = {r["name"]: r for r in listing.collect(snap, "clusterqueue", None)}
    assert (cqs["llm"]["gpusUsed"], cqs["llm"]["gpusBorrowed"]) == (16, 8)
    assert cqs["vision"]["gpusLent"] == 8
    (h100,) = listing.collect(snap, "flavor", None)
    assert (h100["gpus"], h100["gpusAllocated"], h100["allocationRatio"]) == (32, 24, 0.75)


@pytest.mark.parametrize("fmt", ["json", "yaml"])
def test_machine_output_keeps_numbers(fmt: str) -> None:
    import json

    import yaml

    snap = snapshot(o.workload("team-vision", "p", "default", 1))
    rows = listing.collect(snap, "workload", "team-vision")
    text = listing.render("workload", rows, fmt, PLAIN, all_namespaces=False)
    parsed = json.loads(text) if fmt == "json" else yaml.safe_load(text)
    pending = next(r for r in parsed["items"] if r["name"] == "p")
    assert pending["position"] == 1 and pending["gpus"] == 1


@settings(max_examples=30, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(-2, 2), st.integers(0, 5000)), min_size=1, max_size=12, unique=True
    )
)
def test_positions_are_one_to_n_in_priority_then_age_order(jobs: list[tuple[int, int]]) -> None:
    wls = [
        o.workload("team-llm", f"w{i}", "training", 1, priority=p, created=o.NOW - age)
        for i, (p, age) in enumerate(jobs)
    ]
    rows = listing.collect(snapshot(*wls), "workload", "team-llm", status="pending")
    assert [r["position"] for r in rows] == list(range(1, len(jobs) + 1))
    keys = [(-r["priority"], -r["ageSeconds"]) for r in rows]
    assert keys == sorted(keys)


def test_describe_caps_long_lines_and_points_to_list() -> None:
    many = [o.workload("team-llm", f"w{i:02}", "training", 1, created=o.NOW - i) for i in range(60)]
    text = describe.describe(snapshot(*many), "clusterqueue", "llm", "", PLAIN)
    assert re.search(r"^50\s+team-llm/w10\s", text, re.M)  # the oldest 50, in order
    assert "... and 10 more" in text


def a_pod_group(pods: int) -> tuple[o.Obj, list[o.Obj]]:
    """A pod group `sweep` of 2 one-GPU pods in team-vision (its Workload and `pods` of them)."""
    wl = o.workload("team-vision", "podgroup-sweep", "default", 1, count=2)
    wl["metadata"]["labels"] = {names.LABEL_POD_GROUP_NAME: "sweep"}
    made = [
        {
            "metadata": {
                "namespace": "team-vision",
                "name": f"sweep-{i}",
                "labels": {
                    names.LABEL_QUEUE_NAME: "default",
                    names.LABEL_POD_GROUP_NAME: "sweep",
                },
                "annotations": {names.ANNOTATION_POD_GROUP_TOTAL_COUNT: "2"},
            },
            "spec": {"containers": [{"name": "c", "resources": {"limits": {o.GPU: "1"}}}]},
            "status": {"phase": "Pending"},
        }
        for i in range(pods)
    ]
    return wl, made


@pytest.mark.parametrize(("pods", "incomplete"), [(2, False), (1, True)])
def test_a_pod_group_is_judged_by_the_pods_that_exist(pods: int, incomplete: bool) -> None:
    wl, made = a_pod_group(pods)
    objs = o.research_tree()
    objs["workloads"].append(wl)
    objs["pods"] = made
    text = describe.describe(
        Snapshot.from_objects(objs, now=o.NOW), "workload", "podgroup-sweep", "team-vision", PLAIN
    )
    assert ("PodGroupIncomplete" in text) is incomplete
    if incomplete:
        assert "1 of the 2 pods of pod group 'sweep' exist" in text


def test_workload_shows_its_gpu_use_from_the_agents_reports_and_an_idle_flag() -> None:
    objs = o.research_tree()
    v_run = objs["workloads"][0]
    v_run["status"]["gpuUsage"] = {
        "gpus": 8,
        "utilizationPercent": 3,
        "gpuSeconds": 8 * 3600,
        "usedGpuSeconds": 2 * 3600,
        "idleSince": o.ts(o.NOW - 1800),
        "nodes": [
            {"name": "n0", "reportTime": o.ts(o.NOW - 20), "gpus": 8, "utilizationPercent": 3}
        ],
    }
    v_run["status"]["conditions"].append(
        {
            "type": names.COND_GPU_IDLE,
            "status": "True",
            "reason": "IdleGPUs",
            "message": "idle 30 min",
        }
    )
    snap = Snapshot.from_objects(objs, now=o.NOW)
    text = describe.describe(snap, "workload", "v-run", "team-vision", PLAIN)
    assert (
        "GPU use:      8 GPU(s) at 3% (report 20s ago); 2.00 of 8.00 GPU-hours used (25%); "
        "idle for 30 min; GPUIdle: idle 30 min"
    ) in text
    assert "GPU use" not in describe.describe(snap, "workload", "l-run", "team-llm", PLAIN)
