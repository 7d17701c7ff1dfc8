"""config/samples hangs together: every object validates, every reference resolves.

The integration test (tests/integration/test_crds.py) has the real API server accept them too.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest
import yaml

from queuectl.api import (
    KINDS,
    ClusterQueue,
    Cohort,
    LocalQueue,
    Resource,
    ResourceFlavor,
    Topology,
    WorkloadPriorityClass,
    names,
)
from queuectl.api.quantity import canonical

SAMPLES = Path(__file__).resolve().parents[3] / "config" / "samples"
MODELS: dict[str, type[Resource]] = {m.model_fields["kind"].default: m for m in KINDS}


def docs() -> list[dict[str, Any]]:
    return [
        d for p in sorted(SAMPLES.glob("*.yaml")) for d in yaml.safe_load_all(p.read_text()) if d
    ]


@pytest.fixture(scope="module")
def objects() -> dict[str, list[Any]]:
    by_kind: dict[str, list[Any]] = defaultdict(list)
    for d in docs():
        model = MODELS.get(d["kind"])
        by_kind[d["kind"]].append(model.model_validate(d) if model else d)
    return by_kind


def test_samples_cover_every_kind_but_workload(objects: dict[str, list[Any]]) -> None:
    assert set(MODELS) - set(objects) == {"Workload"}  # Workloads are made from Jobs
    assert objects["Job"]


def test_flavors_select_gpu_models_and_the_topology_exists(objects: dict[str, list[Any]]) -> None:
    flavors: dict[str, ResourceFlavor] = {f.metadata.name: f for f in objects["ResourceFlavor"]}
    products = {n: (f.spec.node_labels or {})[names.LABEL_GPU_PRODUCT] for n, f in flavors.items()}
    assert products == {"h100": "NVIDIA-H100-80GB-HBM3", "a100": "NVIDIA-A100-SXM4-80GB"}
    topologies: dict[str, Topology] = {t.metadata.name: t for t in objects["Topology"]}
    assert flavors["h100"].spec.topology_name in topologies
    levels = topologies[flavors["h100"].spec.topology_name or ""].spec.level_labels()
    assert levels == [names.LABEL_TOPOLOGY_BLOCK, names.LABEL_TOPOLOGY_RACK, names.LABEL_HOSTNAME]


def test_cohort_tree_is_org_over_research_and_production(objects: dict[str, list[Any]]) -> None:
    cohorts: dict[str, Cohort] = {c.metadata.name: c for c in objects["Cohort"]}
    parent = {n: c.spec.parent_name for n, c in cohorts.items()}
    assert parent == {"org": None, "research": "org", "production": "org"}
    queues: list[ClusterQueue] = objects["ClusterQueue"]
    assert {q.spec.cohort_name for q in queues} == {"research", "production"}
    limits = [
        r
        for q in queues
        for g in q.spec.resource_groups
        for f in g.flavors
        for r in f.resources
        if r.borrowing_limit is not None or r.lending_limit is not None
    ]
    assert any(r.borrowing_limit is not None for r in limits)
    assert any(r.lending_limit is not None for r in limits)


def test_every_team_queue_has_gpu_cpu_memory_and_falls_back_from_h100_to_a100(
    objects: dict[str, list[Any]],
) -> None:
    flavors = {f.metadata.name for f in objects["ResourceFlavor"]}
    for q in objects["ClusterQueue"]:
        (group,) = q.spec.resource_groups
        assert set(group.covered_resources) == {names.GPU_RESOURCE, "cpu", "memory"}
        assert [f.name for f in group.flavors] == ["h100", "a100"]
        assert {f.name for f in group.flavors} <= flavors
        assert q.spec.namespace_selector is not None, "a queue that selects no namespace is idle"


def test_fleet_quota_adds_up_to_the_standard_test_fleet(objects: dict[str, list[Any]]) -> None:
    """64 H100 and 16 A100 GPUs: the fleet of testenv's gpu_nodes fixture."""
    total: dict[str, int] = defaultdict(int)
    holders: list[Any] = [*objects["ClusterQueue"], *objects["Cohort"]]
    for holder in holders:
        for g in holder.spec.resource_groups:
            for f in g.flavors:
                for r in f.resources:
                    if r.name == names.GPU_RESOURCE:
                        total[f.name] += canonical(r.name, r.nominal_quota)
    assert dict(total) == {"h100": 64, "a100": 16}


def test_local_queues_and_jobs_point_at_what_exists(objects: dict[str, list[Any]]) -> None:
    cqs = {q.metadata.name: q for q in objects["ClusterQueue"]}
    lqs: list[LocalQueue] = objects["LocalQueue"]
    namespaces = {n["metadata"]["name"] for n in objects["Namespace"]}
    for lq in lqs:
        cq = cqs[lq.spec.cluster_queue]
        assert lq.metadata.namespace in namespaces
        selector = cq.spec.namespace_selector
        ns_labels = {"kubernetes.io/metadata.name": lq.metadata.namespace or ""}
        assert selector is not None and selector.matches(ns_labels), lq.metadata.name
    assert any(lq.metadata.name == names.DEFAULT_LOCAL_QUEUE for lq in lqs)

    doors = {(lq.metadata.namespace, lq.metadata.name) for lq in lqs}
    classes = {c.metadata.name for c in objects["WorkloadPriorityClass"]}
    for job in objects["Job"]:
        labels = job["metadata"]["labels"]
        assert (job["metadata"]["namespace"], labels[names.LABEL_QUEUE_NAME]) in doors
        assert labels[names.LABEL_PRIORITY_CLASS] in classes
        assert job["spec"]["suspend"] is True


def test_priority_classes(objects: dict[str, list[Any]]) -> None:
    wpcs: dict[str, WorkloadPriorityClass] = {
        c.metadata.name: c for c in objects["WorkloadPriorityClass"]
    }
    assert wpcs["production"].value > wpcs["research"].value > wpcs["exploration"].value
    assert wpcs["exploration"].preemption_grace_period_seconds == 300


def test_the_gang_sample_requires_one_rack(objects: dict[str, list[Any]]) -> None:
    gangs = [j for j in objects["Job"] if j["spec"].get("parallelism", 1) > 1]
    annotations = [j["spec"]["template"].get("metadata", {}).get("annotations") for j in gangs]
    assert {names.ANNOTATION_PODSET_REQUIRED_TOPOLOGY: names.LABEL_TOPOLOGY_RACK} in annotations


def test_the_checkpointing_sample_reads_the_notice_where_the_contract_puts_it() -> None:
    """The trainer sample mounts its pod's annotations at /etc/queuectl/annotations (the
    documented path) and its script looks for queuectl's deadline key there."""
    (job,) = [
        d for d in docs() if d["kind"] == "Job" and d["metadata"]["name"] == "checkpointing-train"
    ]
    pod = job["spec"]["template"]["spec"]
    (downward,) = [v for v in pod["volumes"] if "downwardAPI" in v]
    (item,) = downward["downwardAPI"]["items"]
    assert item["fieldRef"]["fieldPath"] == "metadata.annotations"
    (container,) = pod["containers"]
    (mount,) = [m for m in container["volumeMounts"] if m["name"] == downward["name"]]
    assert f"{mount['mountPath']}/{item['path']}" == "/etc/queuectl/annotations"
    script = container["args"][0]
    assert "/etc/queuectl/annotations" in script
    assert names.ANNOTATION_PREEMPTION_DEADLINE.replace(".", "\\.").replace("/", "\\/") in script
