"""One label-selector rule for the webhooks and the controller, and one answer for a namespace
the cache has not seen yet: judged by its name label alone, never by labels nobody has read."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from queuectl.api import LabelSelector, names
from queuectl.api.selectors import namespace_labels, namespace_selected, selector_matches

NAME = names.LABEL_NAMESPACE_NAME


def expr(key: str, op: str, *values: str) -> dict[str, Any]:
    return {"matchExpressions": [{"key": key, "operator": op, "values": list(values)}]}


@pytest.mark.parametrize(
    ("scenario", "selector", "seen", "unseen"),
    [
        ("unset: no namespace", None, False, False),
        ("{}: every namespace, seen or not", {}, True, True),
        ("by name: the name label is always known", {"matchLabels": {NAME: "team-a"}}, True, True),
        ("by another name", {"matchLabels": {NAME: "team-b"}}, False, False),
        ("by a label the namespace has", {"matchLabels": {"team": "a"}}, True, False),
        ("NotIn a label it lacks", expr("team", "NotIn", "b"), True, False),
        ("NotIn a label it has", expr("team", "NotIn", "a"), False, False),
        ("DoesNotExist on a label it lacks", expr("tier", "DoesNotExist"), True, False),
        ("name In a list", expr(NAME, "In", "team-a", "team-c"), True, True),
        ("name NotIn a list", expr(NAME, "NotIn", "team-b"), True, True),
        ("an unknown operator selects nothing", expr(NAME, "Gt", "1"), False, False),
    ],
)
def test_a_namespace_seen_and_one_not_seen_yet(
    scenario: str, selector: dict[str, Any] | None, seen: bool, unseen: bool
) -> None:
    """team-a is labelled team=a; the unseen one is the same namespace before its watch
    event arrived. A term the name label cannot decide waits for that event."""
    labels = {NAME: "team-a", "team": "a"}
    assert namespace_selected(selector, "team-a", labels) is seen, scenario
    assert namespace_selected(selector, "team-a", None) is unseen, scenario


def test_a_namespace_is_judged_with_its_name_label_always() -> None:
    assert namespace_labels("fresh", None) == {NAME: "fresh"}
    assert namespace_labels("team-a", {}) == {NAME: "team-a"}
    assert namespace_labels("team-a", {"team": "a"}) == {NAME: "team-a", "team": "a"}
    assert namespace_selected({"matchLabels": {NAME: "team-a"}}, "team-a", {})


KEYS = st.sampled_from(["team", "tier", NAME])
VALUES = st.lists(st.sampled_from(["a", "b", "team-a"]), max_size=3)
EXPRESSIONS = st.builds(
    lambda key, op, values: {"key": key, "operator": op, "values": values},
    KEYS,
    st.sampled_from(["In", "NotIn", "Exists", "DoesNotExist"]),
    VALUES,
)
SELECTORS = st.fixed_dictionaries(
    {},
    optional={
        "matchLabels": st.dictionaries(KEYS, st.sampled_from(["a", "b", "team-a"]), max_size=2),
        "matchExpressions": st.lists(EXPRESSIONS, max_size=3),
    },
)
LABELS = st.dictionaries(KEYS, st.sampled_from(["a", "b", "team-a"]), max_size=3)


@given(SELECTORS, LABELS)
def test_the_typed_model_and_the_raw_dict_agree(
    selector: dict[str, Any], labels: dict[str, str]
) -> None:
    model = LabelSelector.model_validate(selector)
    assert model.matches(labels) is selector_matches(selector, labels)


@given(SELECTORS, LABELS)
def test_an_unseen_namespace_is_never_selected_on_more_than_its_labels_allow(
    selector: dict[str, Any], labels: dict[str, str]
) -> None:
    """Whatever labels the namespace turns out to have, a selector that takes it unseen
    takes it once seen: waiting for the watch event never un-admits anything."""
    if namespace_selected(selector, "team-a", None):
        assert namespace_selected(selector, "team-a", {**labels, NAME: "team-a"})
