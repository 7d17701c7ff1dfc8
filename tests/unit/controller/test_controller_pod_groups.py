"""A pod group's Workload in the controller: which group it is, when it may be admitted (all
its pods exist), and when it is finished."""

from __future__ import annotations

from typing import Any

import pytest

from queuectl.api import names
from queuectl.api.resource import Obj
from queuectl.controller.watch import kube as k
from queuectl.controller.watch.cache import Cache
from queuectl.controller.watch.podgroups import group_pods, incomplete
from queuectl.jobs import podgroup as pg
from queuectl.jobs.registry import KINDS


def pod(name: str, group: str | None = "g", phase: str = "Pending", ns: str = "ns") -> Obj:
    labels = {names.LABEL_QUEUE_NAME: "q"}
    annotations = {}
    if group is not None:
        labels[names.LABEL_POD_GROUP_NAME] = group
        annotations[names.ANNOTATION_POD_GROUP_TOTAL_COUNT] = "2"
    return {
        "metadata": {
            "name": name,
            "namespace": ns,
            "uid": f"uid-{name}",
            "resourceVersion": "1",
            "labels": labels,
            "annotations": annotations,
        },
        "spec": {"containers": [{"name": "c"}]},
        "status": {"phase": phase},
    }


def workload(count: int = 2, group: str | None = "g", owner: str | None = None) -> Obj:
    meta: dict[str, Any] = {"name": "w", "namespace": "ns", "labels": {}}
    if group is not None:
        meta["labels"][names.LABEL_POD_GROUP_NAME] = group
    if owner is not None:
        meta["ownerReferences"] = [
            {"apiVersion": "v1", "kind": "Pod", "name": owner, "uid": "u", "controller": True}
        ]
    return {"metadata": meta, "spec": {"podSets": [{"name": "ps", "count": count}]}}


def cache_with(*pods: Obj) -> Cache:
    cache = Cache(None, (k.PODS, k.WORKLOADS))  # type: ignore[arg-type]
    for p in pods:
        cache.queued_pods.apply("ADDED", p)
    return cache


def test_a_workload_names_its_group_by_label_or_its_single_pod_by_owner() -> None:
    assert pg.group_of_workload(workload()) == pg.GroupKey("ns", "g", False)
    assert pg.group_of_workload(workload(group=None, owner="solo")) == pg.GroupKey(
        "ns", "solo", True
    )
    assert pg.group_of_workload(workload(group=None)) is None  # a Job's Workload


def test_group_pods_are_those_of_its_namespace_and_name() -> None:
    cache = cache_with(pod("a"), pod("b"), pod("c", group="other"), pod("d", ns="elsewhere"))
    assert [p["metadata"]["name"] for p in group_pods(cache, pg.GroupKey("ns", "g"))] == ["a", "b"]


@pytest.mark.parametrize(
    ("pods", "waits"),
    [
        ([pod("a"), pod("b")], False),
        ([pod("a")], True),
        ([], True),  # preempted: its pods were deleted, replacements not created yet
        ([pod("a"), pod("b", phase="Failed")], True),
    ],
    ids=["complete", "one-missing", "none", "one-failed"],
)
def test_a_group_is_withheld_from_admission_until_all_its_pods_exist(
    pods: list[Obj], waits: bool
) -> None:
    why = incomplete(cache_with(*pods), workload())
    assert (why is not None) == waits
    if why is not None:
        assert "pods of pod group 'g' exist" in why


def test_a_jobs_workload_is_never_withheld_for_pods() -> None:
    assert incomplete(cache_with(), workload(group=None)) is None


@pytest.mark.parametrize(
    ("phases", "single", "finished"),
    [
        (["Succeeded", "Succeeded"], False, (True, "All 2 pods of the group succeeded")),
        (["Succeeded", "Running"], False, None),
        (["Succeeded", "Failed"], False, None),  # a failed pod of a group may be replaced
        (["Succeeded", "Failed", "Succeeded"], False, (True, "All 2 pods of the group succeeded")),
        (["Failed"], True, (False, "Pod failed")),
        (["Succeeded"], True, (True, "Pod succeeded")),
        (["Running"], True, None),
    ],
)
def test_when_a_group_is_finished(
    phases: list[str], single: bool, finished: tuple[bool, str] | None
) -> None:
    pods = [pod(f"p{i}", phase=ph) for i, ph in enumerate(phases)]
    key = pg.GroupKey("ns", "p0" if single else "g", single)
    assert pg.finished(key, workload(count=1 if single else 2), pods) == finished


def test_a_pod_of_a_kind_loaded_with_job_kind_is_its_owners_not_a_pod_group() -> None:
    """The controller is given the kinds the webhooks are given: a Widget's queued pod is the
    Widget's (counted in its Workload), never a pod group of its own beside it."""
    from e2e.widget_kind import GROUP, Widget

    kinds = KINDS.with_kinds(Widget())
    owned = pod("w-0", group=None)
    owned["metadata"]["ownerReferences"] = [
        {"apiVersion": f"{GROUP}/v1", "kind": "Widget", "name": "w", "uid": "u", "controller": True}
    ]
    cache = Cache.for_kinds(None, kinds.values())  # type: ignore[arg-type]
    cache.queued_pods.apply("ADDED", owned)
    assert group_pods(cache, pg.GroupKey("ns", "w-0", True)) == []
    plain = cache_with(owned)  # a controller that does not know Widgets: a group of one
    assert [p["metadata"]["name"] for p in group_pods(plain, pg.GroupKey("ns", "w-0", True))] == [
        "w-0"
    ]
