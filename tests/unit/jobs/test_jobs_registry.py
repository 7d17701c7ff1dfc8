"""The registry: one entry per kind, found by Kind, (group, kind), Resource and owner; a second
kind is one registration; a bad registration is a clear error."""

from __future__ import annotations

import pytest

from e2e.widget_kind import GROUP, WIDGETS, Widget
from queuectl.api.resource import Resource
from queuectl.jobs.batch import JOBS, BatchJob
from queuectl.jobs.registry import KINDS, Registry, load_kind


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
