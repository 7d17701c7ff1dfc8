"""Invariants over generated ClusterQueues: valid ones round-trip, the lending rule is exact."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from queuectl.api import ClusterQueue
from queuectl.api.quantity import parse
from queuectl.api.quota import LENDING_WITHIN_NOMINAL

RESOURCES = ["cpu", "memory", "nvidia.com/gpu", "pods"]
FLAVORS = ["h100", "a100", "l4", "cpu-only"]
SUFFIX = {"cpu": ["", "m"], "memory": ["", "Ki", "Mi", "Gi", "k", "M", "m"]}


@st.composite
def quantities(draw: st.DrawFn, resource: str) -> int | str:
    n = draw(st.integers(min_value=0, max_value=10**6))
    suffix = draw(st.sampled_from(SUFFIX.get(resource, [""])))
    return n if not suffix and draw(st.booleans()) else f"{n}{suffix}"


@st.composite
def cluster_queues(draw: st.DrawFn) -> dict[str, Any]:
    resources = draw(st.lists(st.sampled_from(RESOURCES), min_size=1, max_size=4, unique=True))
    split = draw(st.integers(min_value=1, max_value=len(resources)))
    covered = [resources[:split], resources[split:]] if split < len(resources) else [resources]
    flavors = iter(draw(st.permutations(FLAVORS)))
    groups = []
    for cover in covered:
        group_flavors = []
        for _ in range(draw(st.integers(min_value=1, max_value=2))):
            quotas = []
            for r in cover:
                quota: dict[str, Any] = {"name": r, "nominalQuota": draw(quantities(r))}
                if draw(st.booleans()):
                    quota["borrowingLimit"] = draw(quantities(r))
                quotas.append(quota)
            group_flavors.append({"name": next(flavors), "resources": quotas})
        groups.append({"coveredResources": cover, "flavors": group_flavors})
    return {
        "apiVersion": "queuectl.io/v1beta1",
        "kind": "ClusterQueue",
        "metadata": {"name": "q"},
        "spec": {"cohortName": "org", "resourceGroups": groups},
    }


@settings(max_examples=100, deadline=None)
@given(cluster_queues())
def test_valid_cluster_queues_round_trip(obj: dict[str, Any]) -> None:
    cq = ClusterQueue.model_validate(obj)
    out = cq.to_api()
    assert ClusterQueue.model_validate(out) == cq
    assert out["spec"]["resourceGroups"] == obj["spec"]["resourceGroups"]  # spellings kept


@settings(max_examples=150, deadline=None)
@given(
    st.sampled_from(RESOURCES).flatmap(
        lambda r: st.tuples(st.just(r), quantities(r), quantities(r))
    )
)
def test_lending_limit_is_refused_exactly_when_it_exceeds_nominal(
    case: tuple[str, int | str, int | str],
) -> None:
    resource, nominal, lending = case
    obj = {
        "kind": "ClusterQueue",
        "metadata": {"name": "q"},
        "spec": {
            "cohortName": "org",
            "resourceGroups": [
                {
                    "coveredResources": [resource],
                    "flavors": [
                        {
                            "name": "f",
                            "resources": [
                                {"name": resource, "nominalQuota": nominal, "lendingLimit": lending}
                            ],
                        }
                    ],
                }
            ],
        },
    }
    too_much = parse(lending) > parse(nominal)
    try:
        ClusterQueue.model_validate(obj)
        refused = False
    except ValidationError as err:
        assert LENDING_WITHIN_NOMINAL.message in str(err)
        refused = True
    assert refused == too_much
