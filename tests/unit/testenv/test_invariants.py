"""The fault suite's invariants, on hand-made snapshots: each breach is named, nothing else is."""

from __future__ import annotations

from typing import Any

import pytest

from queuectl.api import names
from queuectl.testenv.invariants import History, Snapshot, Violation, check, quota_limits

NS = "team"


def cq(name: str, gpus: int, cohort: str | None = None, **limits: int) -> dict[str, Any]:
    res: dict[str, Any] = {"name": names.GPU_RESOURCE, "nominalQuota": str(gpus)}
    res.update({k: str(v) for k, v in limits.items()})
    spec: dict[str, Any] = {
        "resourceGroups": [
            {
                "coveredResources": [names.GPU_RESOURCE],
                "flavors": [{"name": "h100", "resources": [res]}],
            }
        ]
    }
    if cohort:
        spec["cohortName"] = cohort
    return {"metadata": {"name": name}, "spec": spec}


def lq(name: str, cluster_queue: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": NS}, "spec": {"clusterQueue": cluster_queue}}


def job(name: str, queue: str = "lq") -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": NS, "labels": {names.LABEL_QUEUE_NAME: queue}}}


def owned(name: str, job_name: str) -> dict[str, Any]:
    return {
        "name": name,
        "namespace": NS,
        "uid": f"uid-{name}",
        "ownerReferences": [{"kind": "Job", "name": job_name}],
    }


def wl(
    name: str,
    job_name: str,
    cluster_queue: str = "cq",
    pods: int = 1,
    gpus: int = 8,
    admitted: bool = True,
    finished: bool = False,
    since: str = "t1",
) -> dict[str, Any]:
    status: dict[str, Any] = {"conditions": []}
    if admitted:
        status["admission"] = {
            "clusterQueue": cluster_queue,
            "podSetAssignments": [
                {
                    "name": "main",
                    "count": pods,
                    "flavors": {names.GPU_RESOURCE: "h100"},
                    "resourceUsage": {names.GPU_RESOURCE: str(pods * gpus)},
                }
            ],
        }
        status["conditions"].append(
            {"type": names.COND_QUOTA_RESERVED, "status": "True", "lastTransitionTime": since}
        )
    if finished:
        status["conditions"].append({"type": names.COND_FINISHED, "status": "True"})
    return {"metadata": owned(name, job_name), "status": status}


def pod(name: str, job_name: str, gpus: int = 8, phase: str = "Running") -> dict[str, Any]:
    return {
        "metadata": owned(name, job_name),
        "spec": {
            "nodeName": "n1",
            "containers": [{"resources": {"requests": {names.GPU_RESOURCE: str(gpus)}}}],
        },
        "status": {"phase": phase},
    }


def snap(workloads: list[Any], pods: list[Any], jobs: list[Any] | None = None) -> Snapshot:
    return Snapshot([cq("cq", 16)], [lq("lq", "cq")], workloads, jobs or [job("a"), job("b")], pods)


@pytest.mark.parametrize(
    ("name", "snapshot", "kinds"),
    [
        ("all within bounds", snap([wl("wa", "a"), wl("wb", "b")], [pod("p1", "a")]), []),
        (
            "admitted over quota",
            snap([wl("wa", "a", pods=2), wl("wb", "b")], [], [job("a"), job("b")]),
            ["quota"],
        ),
        (
            "finished work holds no quota",
            snap([wl("wa", "a", pods=2), wl("wb", "b", finished=True)], []),
            [],
        ),
        (
            "a pod without admission",
            snap([wl("wa", "a", admitted=False)], [pod("p1", "a")]),
            ["pods-over-admission"],
        ),
        (
            "a scaled-up job: more pods than admitted, more GPUs than quota",
            snap([wl("wa", "a")], [pod(f"p{i}", "a") for i in range(3)]),
            ["pods-over-admission", "pods-over-quota"],
        ),
        (
            "succeeded pods hold nothing",
            snap([wl("wa", "a")], [pod("p1", "a"), pod("p2", "a", phase="Succeeded")]),
            [],
        ),
        (
            "one job, two admitted workloads",
            snap([wl("w1", "a"), wl("w2", "a")], []),
            ["two-admitted-workloads"],
        ),
    ],
)
def test_each_breach_is_named(name: str, snapshot: Snapshot, kinds: list[str]) -> None:
    assert sorted(v.kind for v in check(snapshot)) == kinds, name


def test_a_quota_breach_says_how_much() -> None:
    found = check(snap([wl("wa", "a", pods=3)], []))
    assert found == [
        Violation("quota", "cq", f"h100/{names.GPU_RESOURCE}: 24 admitted > 16 allowed")
    ]


def test_borrowing_is_bounded_by_what_the_cohort_lends_and_the_borrowing_limit() -> None:
    limits = quota_limits(
        [
            cq("a", 8, "co"),
            cq("b", 8, "co", lendingLimit=2),
            cq("c", 8, "co", borrowingLimit=3),
            cq("d", 4),
        ]
    )
    fr = ("h100", names.GPU_RESOURCE)
    assert limits["a"][fr] == 8 + 2 + 8
    assert limits["c"][fr] == 8 + 3
    assert limits["d"][fr] == 4  # no cohort, nothing to borrow


def test_history_counts_a_readmission_without_eviction_as_double() -> None:
    history = History()
    history.observe([wl("wa", "a", since="t1")], at=1.0)
    history.observe([wl("wa", "a", since="t1")], at=2.0)
    assert not history.double_admitted
    evicted = wl("wa", "a", since="t2")
    evicted["status"]["conditions"].append(
        {"type": names.COND_EVICTED, "status": "True", "lastTransitionTime": "t1b"}
    )
    history.observe([evicted], at=3.0)
    assert not history.double_admitted  # admitted again after an eviction: fine
    history.observe([wl("wa", "a", since="t3")], at=4.0)
    assert history.double_admitted == {f"{NS}/wa"}


def test_history_says_when_admissions_resumed() -> None:
    history = History()
    history.observe([wl("w1", "a")], at=1.0)
    history.observe([wl("w1", "a"), wl("w2", "b", admitted=False)], at=2.0)
    assert history.first_admission_after(1.5) is None
    history.observe([wl("w1", "a"), wl("w2", "b")], at=5.0)
    assert history.first_admission_after(1.5) == 5.0


# --- every GPU pod of a namespace, whoever made it, against what was admitted there --------
def node(name: str, product: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": {names.LABEL_GPU_PRODUCT: product}}}


FLAVORS = [
    {"metadata": {"name": "h100"}, "spec": {"nodeLabels": {names.LABEL_GPU_PRODUCT: "H100"}}},
    {"metadata": {"name": "a100"}, "spec": {"nodeLabels": {names.LABEL_GPU_PRODUCT: "A100"}}},
]
NODES = [node("n1", "H100"), node("n2", "A100")]


def unowned_pod(name: str, gpus: int = 8, on: str = "n1") -> dict[str, Any]:
    """A pod no Job owns: a JobSet's grandchild, a RayCluster's worker, a bare pod."""
    p = pod(name, "x", gpus=gpus)
    p["metadata"]["ownerReferences"] = [{"kind": "RayCluster", "name": "rc"}]
    p["spec"]["nodeName"] = on
    return p


def ns_snap(workloads: list[Any], pods: list[Any]) -> Snapshot:
    return Snapshot([cq("cq", 16)], [lq("lq", "cq")], workloads, [], pods, NODES, FLAVORS, [NS])


@pytest.mark.parametrize(
    ("name", "snapshot", "kinds"),
    [
        (
            "a RayCluster's two workers within its admission",
            ns_snap([wl("wa", "rc", pods=2)], [unowned_pod("w1"), unowned_pod("w2")]),
            [],
        ),
        (
            "a child scaled past its parent's admission",
            ns_snap([wl("wa", "rc", pods=1)], [unowned_pod("w1"), unowned_pod("w2")]),
            ["gpu-pods-over-admission", "gpus-over-admission"],
        ),
        (
            "a pod moved to the other flavor's nodes",
            ns_snap([wl("wa", "rc", pods=1)], [unowned_pod("w1", on="n2")]),
            ["gpus-off-flavor"],
        ),
        (
            "a bare GPU pod nobody admitted",
            ns_snap([], [unowned_pod("bare")]),
            ["gpu-pods-over-admission", "gpus-off-flavor"],
        ),
        (
            "a pod that grew a GPU container",
            ns_snap([wl("wa", "rc", pods=1, gpus=4)], [unowned_pod("w1", gpus=12)]),
            ["gpus-over-admission"],
        ),
        (
            "CPU-only pods hold no GPUs",
            ns_snap([], [unowned_pod("head", gpus=0)]),
            [],
        ),
    ],
)
def test_gpus_are_held_to_the_namespaces_admissions_per_flavor(
    name: str, snapshot: Snapshot, kinds: list[str]
) -> None:
    assert sorted(v.kind for v in check(snapshot)) == kinds, name


def test_a_pod_holds_its_containers_and_sidecars_or_its_largest_init_container() -> None:
    p = unowned_pod("w1", gpus=4)
    p["spec"]["initContainers"] = [
        {"resources": {"limits": {names.GPU_RESOURCE: "8"}}},
        {"resources": {"requests": {names.GPU_RESOURCE: "2"}}},
    ]
    found = check(ns_snap([wl("wa", "rc", pods=1, gpus=4)], [p]))
    assert [v.detail for v in found] == ["8 GPUs active on h100, 4 admitted"]
    p["spec"]["initContainers"][1]["restartPolicy"] = "Always"  # a sidecar: runs beside them
    found = check(ns_snap([wl("wa", "rc", pods=1, gpus=4)], [p]))
    assert [v.detail for v in found] == ["8 GPUs active on h100, 4 admitted"]
    p["spec"]["initContainers"][0]["resources"]["limits"][names.GPU_RESOURCE] = "1"
    found = check(ns_snap([wl("wa", "rc", pods=1, gpus=4)], [p]))
    assert [v.detail for v in found] == ["6 GPUs active on h100, 4 admitted"]


def test_a_child_jobs_pods_belong_to_its_owner_not_to_a_workload_of_its_own() -> None:
    """A JobSet's child Job has no Workload: the JobSet's admission stands behind its pods."""
    child = job("js-workers-0")
    child["metadata"]["ownerReferences"] = [{"kind": "JobSet", "name": "js", "controller": True}]
    found = check(snap([], [pod("p1", "js-workers-0")], [child]))
    assert [v.kind for v in found] == []
