"""Label value formats and namespace selector matching."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from queuectl.api.selectors import selector_matches
from queuectl.webhooks.formats import (
    INT32_MAX,
    is_dns1123_label,
    max_exec_time_problem,
    podset_group_problems,
    priority_class_problem,
    queue_name_problem,
)


@pytest.mark.parametrize(
    ("value", "ok"),
    [
        ("team-a", True),
        ("a", True),
        ("0", True),
        ("a" * 63, True),
        ("a" * 64, False),
        ("Team-a", False),
        ("-a", False),
        ("a-", False),
        ("a.b", False),
        ("a_b", False),
        ("", False),
    ],
)
def test_queue_names_are_dns1123_labels(value: str, ok: bool) -> None:
    assert (queue_name_problem(value) is None) is ok


@pytest.mark.parametrize(
    ("value", "ok"),
    [
        ("production", True),
        ("tier.high", True),
        ("a" * 64, False),
        ("Prod", False),
        ("a..b", False),
    ],
)
def test_priority_class_names(value: str, ok: bool) -> None:
    assert (priority_class_problem(value) is None) is ok


@pytest.mark.parametrize(
    ("value", "ok"),
    [
        ("1", True),
        ("3600", True),
        (str(INT32_MAX), True),
        (str(INT32_MAX + 1), False),
        ("0", False),
        ("-5", False),
        ("+5", False),
        ("1h", False),
        ("1.5", False),
        (" 5", False),
        ("", False),
        ("٣", False),  # a non-ASCII digit int() would accept
    ],
)
def test_max_exec_time_is_a_positive_int32(value: str, ok: bool) -> None:
    assert (max_exec_time_problem(value) is None) is ok


RACK, BLOCK = "topology.queuectl.io/rack", "topology.queuectl.io/block"


@pytest.mark.parametrize(
    ("pod_sets", "fragments"),
    [
        ([("master", (RACK, None, "ddp")), ("worker", (RACK, None, "ddp"))], []),
        ([("master", (None, BLOCK, "ddp")), ("worker", (None, BLOCK, "ddp"))], []),
        ([("main", (RACK, None, None))], []),
        (
            [("master", (RACK, None, "DDP group"))],
            [
                "pod set 'master': annotation queuectl.io/podset-group-name='DDP group' is not a "
                "valid pod-set group name",
                "(e.g. 'ddp')",
            ],
        ),
        (
            [("master", (None, None, "ddp"))],
            ["needs a topology level to share: add queuectl.io/podset-required-topology"],
        ),
        (
            [("master", (RACK, None, "ddp")), ("worker", (BLOCK, None, "ddp"))],
            [
                f"pod-set group 'ddp' ask for different topology levels (master: required {RACK}; "
                f"worker: required {BLOCK})",
                "give every member the same level",
            ],
        ),
        (
            [("master", (RACK, None, "ddp")), ("worker", (None, RACK, "ddp"))],
            [f"master: required {RACK}; worker: preferred {RACK}"],
        ),
    ],
)
def test_podset_groups_need_a_valid_name_and_one_level_for_all_members(
    pod_sets: list[tuple[str, tuple[str | None, ...]]], fragments: list[str]
) -> None:
    problems = podset_group_problems(pod_sets)
    assert len(problems) == (1 if fragments else 0), problems
    for fragment in fragments:
        assert fragment in problems[0]


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet="abcz09-._A", max_size=70))
def test_dns1123_label_agrees_with_its_definition(value: str) -> None:
    expected = (
        0 < len(value) <= 63
        and all(c in "abcdefghijklmnopqrstuvwxyz0123456789-" for c in value)
        and value[0] != "-"
        and value[-1] != "-"
    )
    assert is_dns1123_label(value) is expected


LABELS = {"team": "a", "tier": "gold", "kubernetes.io/metadata.name": "ns"}


@pytest.mark.parametrize(
    ("selector", "matches"),
    [
        (None, False),
        ({}, True),
        ({"matchLabels": {"team": "a"}}, True),
        ({"matchLabels": {"team": "b"}}, False),
        ({"matchExpressions": [{"key": "tier", "operator": "In", "values": ["gold", "x"]}]}, True),
        ({"matchExpressions": [{"key": "tier", "operator": "NotIn", "values": ["gold"]}]}, False),
        ({"matchExpressions": [{"key": "zone", "operator": "NotIn", "values": ["x"]}]}, True),
        ({"matchExpressions": [{"key": "team", "operator": "Exists"}]}, True),
        ({"matchExpressions": [{"key": "team", "operator": "DoesNotExist"}]}, False),
        ({"matchExpressions": [{"key": "team", "operator": "Gt", "values": ["1"]}]}, False),
        (
            {
                "matchLabels": {"team": "a"},
                "matchExpressions": [{"key": "tier", "operator": "In", "values": ["silver"]}],
            },
            False,
        ),
    ],
)
def test_label_selectors(selector: dict[str, Any] | None, matches: bool) -> None:
    assert selector_matches(selector, LABELS) is matches
