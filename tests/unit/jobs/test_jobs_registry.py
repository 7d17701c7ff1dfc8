"""The registry: one entry per kind, found by Kind, (group, kind), Resource and owner; a second
kind is one registration; a bad registration is a clear error; a claimed owner is verified."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from e2e.widget_kind import GROUP, WIDGETS, Widget
from queuectl.api import names
from queuectl.api.resource import Resource
from queuectl.jobs.batch import JOBS, BatchJob
from queuectl.jobs.registry import KINDS, Registry, controlled_by, load_kind, owner


def test_every_registered_kind_is_one_entry_with_its_own_resource() -> None:
    resources = [kind.resource for kind in KINDS.values()]
    assert len(set(resources)) == len(resources) == len(KINDS)
    assert all(KINDS[name].resource.kind == name for name in KINDS)
    assert isinstance(KINDS["Job"], BatchJob)


@pytest.mark.parametrize(
    ("question", "found"),
    [
        ("group and kind", lambda r: r.for_group_kind("batch", "Job")),
        ("resource", lambda r: r.for_resource(JOBS)),
        ("owner reference", lambda r: r.for_owner({"apiVersion": "batch/v1", "kind": "Job"})),
    ],
)
def test_a_kind_is_found_by_every_name_it_goes_by(question: str, found: object) -> None:
    assert found(KINDS) is KINDS["Job"], question  # type: ignore[operator]


def test_a_kind_of_another_group_with_the_same_name_is_not_it() -> None:
    assert KINDS.for_group_kind("example.com", "Job") is None
    assert KINDS.for_owner({"apiVersion": "example.com/v1", "kind": "Job"}) is None
    assert KINDS.for_resource(Resource("batch", "v1", "jobs", True, "Other")) is None


def test_a_second_kind_is_one_registration() -> None:
    both = KINDS.with_kinds(Widget())
    assert len(both) == len(KINDS) + 1
    assert both.for_group_kind(GROUP, "Widget") is both["Widget"]
    assert both.for_resource(WIDGETS) is both["Widget"]
    assert "Widget" not in KINDS  # the shared registry is left alone


def test_two_kinds_of_one_name_are_refused() -> None:
    with pytest.raises(ValueError, match="job kind Job registered twice"):
        Registry([BatchJob(), BatchJob()])


@pytest.mark.parametrize(
    ("spec", "problem"),
    [
        ("e2e.widget_kind", "expected MODULE:ATTRIBUTE"),
        ("e2e.no_such_module:Widget", "No module named"),
        ("e2e.widget_kind:Gadget", "has no attribute 'Gadget'"),
        ("e2e.widget_kind:GROUP", "has no `resource`; is it a JobKind"),
    ],
)
def test_loading_a_kind_names_what_is_wrong(spec: str, problem: str) -> None:
    with pytest.raises(ValueError, match=problem):
        load_kind(spec)


def test_a_kind_loads_from_its_class_or_an_instance() -> None:
    assert isinstance(load_kind("e2e.widget_kind:Widget"), Widget)


# --- ownership is verified, not claimed ------------------------------------------------------
CLAIMED_KINDS = [
    ("JobSet", "jobset.x-k8s.io/v1alpha2"),
    ("JobSet", "example.com/v1"),
    ("RayJob", "ray.io/v1"),
    ("PyTorchJob", "kubeflow.org/v1"),
    ("CronJob", "batch/v1"),
]


@given(
    name=st.sampled_from(["driver", "other"]),
    uid=st.sampled_from(["uid-driver", "uid-other", ""]),
    kind=st.sampled_from(CLAIMED_KINDS),
    controller=st.booleans(),
    queued=st.booleans(),
)
def test_a_claimed_owner_is_one_only_when_every_part_of_the_claim_holds(
    name: str, uid: str, kind: tuple[str, str], controller: bool, queued: bool
) -> None:
    """The one JobSet `driver` (uid-driver) exists; a Job claims some owner. It is an owner
    only when the claim names exactly that object, as its controller, and it is queued."""
    labels = {names.LABEL_QUEUE_NAME: "lq"} if queued else {}
    jobset = {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": "driver", "namespace": "ns", "uid": "uid-driver", "labels": labels},
    }

    def find(res: Resource, namespace: str, found: str) -> dict[str, Any] | None:
        return jobset if (res.plural, namespace, found) == ("jobsets", "ns", "driver") else None

    ref = {"apiVersion": kind[1], "kind": kind[0], "name": name, "uid": uid}
    child = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": "c",
            "namespace": "ns",
            "ownerReferences": [ref | {"controller": controller}],
        },
    }
    holds = (
        controller
        and kind == CLAIMED_KINDS[0]
        and name == "driver"
        and uid == "uid-driver"
        and queued
    )
    assert (owner(child, KINDS, find) is not None) is holds
    claimed = controller and kind in CLAIMED_KINDS[2:4]
    assert (controlled_by(child, KINDS) is not None) is (
        claimed or (controller and kind == CLAIMED_KINDS[0])
    )
