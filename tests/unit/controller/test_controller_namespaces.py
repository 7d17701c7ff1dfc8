"""A namespace the controller has not seen yet: team-a's namespace was just created and its
Workload's event arrived before the namespace's. The controller judges it as the webhooks do,
by the name label every namespace carries, and waits for the namespace's own event for any
other label (that event refeeds its Workloads)."""

from __future__ import annotations

from typing import Any, cast

import pytest

from queuectl.api import names
from queuectl.controller.watch import kube as k
from queuectl.controller.watch.cache import Cache

NAME = names.LABEL_NAMESPACE_NAME


def cache(cq_selector: dict[str, Any] | None, wpc_selector: dict[str, Any] | None) -> Cache:
    c = Cache(cast(k.Kube, None))  # never started: its stores are filled by hand
    c.store(k.CLUSTER_QUEUES).replace(
        [{"metadata": {"name": "cq"}, "spec": {"namespaceSelector": cq_selector}}]
    )
    wpc: dict[str, Any] = {"metadata": {"name": "top"}, "value": 1000}
    if wpc_selector is not None:
        wpc["namespaceSelector"] = wpc_selector
    c.store(k.PRIORITY_CLASSES_OURS).replace([wpc])
    return c


def see(c: Cache, **labels: str) -> None:
    c.store(k.NAMESPACES).replace(
        [{"metadata": {"name": "team-a", "labels": {NAME: "team-a", **labels}}}]
    )


NOT_B = {"matchExpressions": [{"key": "team", "operator": "NotIn", "values": ["b"]}]}


@pytest.mark.parametrize(
    ("scenario", "selector", "before", "after_seen_as_b"),
    [
        ("a ClusterQueue for every namespace takes it at once", {}, True, True),
        ("one naming it takes it at once", {"matchLabels": {NAME: "team-a"}}, True, True),
        ("one for team=b waits, then takes it", {"matchLabels": {"team": "b"}}, False, True),
        ("one closed to team=b does not take it on a guess", NOT_B, False, False),
        ("an unset selector never takes it", None, False, False),
    ],
)
def test_a_cluster_queue_and_a_namespace_not_seen_yet(
    scenario: str, selector: dict[str, Any] | None, before: bool, after_seen_as_b: bool
) -> None:
    c = cache(selector, None)
    assert c.namespace_selected("cq", "team-a") is before, scenario
    see(c, team="b")
    assert c.namespace_selected("cq", "team-a") is after_seen_as_b, scenario


@pytest.mark.parametrize(
    ("scenario", "selector", "before", "after_seen_as_b"),
    [
        ("a class without a selector is for everyone", None, True, True),
        ("a class naming the namespace", {"matchLabels": {NAME: "team-a"}}, True, True),
        ("a class closed to team=b grants nothing on a guess", NOT_B, False, False),
        ("a class for team=b waits for the namespace", {"matchLabels": {"team": "b"}}, False, True),
    ],
)
def test_a_priority_class_and_a_namespace_not_seen_yet(
    scenario: str, selector: dict[str, Any] | None, before: bool, after_seen_as_b: bool
) -> None:
    c = cache({}, selector)
    assert c.priority_class_allowed("top", "team-a") is before, scenario
    see(c, team="b")
    assert c.priority_class_allowed("top", "team-a") is after_seen_as_b, scenario
