"""Bad objects are refused in Python with the same sentence the API server's CEL rule gives."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest
from pydantic import ValidationError

from queuectl.api import (
    ClusterQueue,
    Cohort,
    LocalQueue,
    Resource,
    ResourceFlavor,
    Topology,
    Workload,
    queues,
    quota,
)
from queuectl.api.flavor import HOSTNAME_LAST, LEVELS_UNIQUE, TOPOLOGY_NEEDS_NODE_LABELS
from queuectl.api.workload import ONE_TOPOLOGY_MODE, POD_SET_NAMES_UNIQUE


def cq(*, cohort: str | None = "org", groups: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"resourceGroups": groups if groups is not None else [gpu_group()]}
    if cohort:
        spec["cohortName"] = cohort
    return {
        "apiVersion": "queuectl.io/v1beta1",
        "kind": "ClusterQueue",
        "metadata": {"name": "q"},
        "spec": spec,
    }


def gpu_group(*flavors: str, **quota_fields: Any) -> dict[str, Any]:
    return {
        "coveredResources": ["nvidia.com/gpu"],
        "flavors": [
            {
                "name": f,
                "resources": [{"name": "nvidia.com/gpu", "nominalQuota": 8, **quota_fields}],
            }
            for f in (flavors or ("h100",))
        ],
    }


def mutate(obj: dict[str, Any], change: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
    out = copy.deepcopy(obj)
    change(out)
    return out


def first_quota(o: dict[str, Any]) -> dict[str, Any]:
    return o["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]  # type: ignore[no-any-return]


WORKLOAD = {
    "apiVersion": "queuectl.io/v1beta1",
    "kind": "Workload",
    "metadata": {"name": "w", "namespace": "n"},
    "spec": {"podSets": [{"name": "main", "count": 1, "template": {}}], "queueName": "default"},
}

# (case, model, object, where the error points, words it must contain)
BAD: list[tuple[str, type[Resource], dict[str, Any], str, str]] = [
    (
        "lending above nominal",
        ClusterQueue,
        cq(groups=[gpu_group(lendingLimit=9)]),
        "spec.resourceGroups.0.flavors.0.resources.0",
        quota.LENDING_WITHIN_NOMINAL.message,
    ),
    (
        "limits without cohort",
        ClusterQueue,
        cq(cohort=None, groups=[gpu_group(borrowingLimit=2)]),
        "spec",
        queues.CQ_LIMITS_NEED_COHORT.message,
    ),
    (
        "cohort limits without parent",
        Cohort,
        {
            "kind": "Cohort",
            "metadata": {"name": "org"},
            "spec": {"resourceGroups": [gpu_group(lendingLimit=1)]},
        },
        "spec",
        queues.COHORT_LIMITS_NEED_PARENT.message,
    ),
    (
        "cohort is its own parent",
        Cohort,
        {"kind": "Cohort", "metadata": {"name": "org"}, "spec": {"parentName": "org"}},
        "",
        queues.COHORT_NOT_OWN_PARENT.message,
    ),
    (
        "flavor twice in a group",
        ClusterQueue,
        cq(groups=[gpu_group("h100", "h100")]),
        "spec.resourceGroups",
        quota.FLAVOR_ONCE.message,
    ),
    (
        "flavor in two groups",
        ClusterQueue,
        cq(
            groups=[
                gpu_group("h100"),
                {
                    "coveredResources": ["cpu"],
                    "flavors": [
                        {"name": "h100", "resources": [{"name": "cpu", "nominalQuota": 1}]}
                    ],
                },
            ]
        ),
        "spec.resourceGroups",
        quota.FLAVOR_ONCE.message,
    ),
    (
        "resource in two groups",
        ClusterQueue,
        cq(groups=[gpu_group("h100"), gpu_group("a100")]),
        "spec.resourceGroups",
        quota.RESOURCE_IN_ONE_GROUP.message,
    ),
    (
        "resource twice in a flavor",
        ClusterQueue,
        mutate(
            cq(),
            lambda o: o["spec"]["resourceGroups"][0]["flavors"][0]["resources"].append(
                {"name": "nvidia.com/gpu", "nominalQuota": 1}
            ),
        ),
        "spec.resourceGroups.0.flavors.0",
        quota.RESOURCES_ONCE_PER_FLAVOR.message,
    ),
    (
        "covered resource twice",
        ClusterQueue,
        mutate(
            cq(),
            lambda o: o["spec"]["resourceGroups"][0]["coveredResources"].append("nvidia.com/gpu"),
        ),
        "spec.resourceGroups.0",
        quota.COVERED_RESOURCES_ONCE.message,
    ),
    (
        "flavor misses a covered resource",
        ClusterQueue,
        mutate(cq(), lambda o: o["spec"]["resourceGroups"][0]["coveredResources"].append("cpu")),
        "spec.resourceGroups.0",
        quota.FLAVORS_LIST_COVERED_RESOURCES.message,
    ),
    (
        "negative quota",
        ClusterQueue,
        mutate(cq(), lambda o: first_quota(o).update(nominalQuota="-8")),
        "spec.resourceGroups.0.flavors.0.resources.0.nominalQuota",
        "negative",
    ),
    (
        "half a GPU",
        ClusterQueue,
        mutate(cq(), lambda o: first_quota(o).update(nominalQuota="0.5")),
        "spec.resourceGroups.0.flavors.0.resources.0",
        "not a whole number",
    ),
    (
        "unquoted float",
        ClusterQueue,
        mutate(cq(), lambda o: first_quota(o).update(nominalQuota=1.5)),
        "spec.resourceGroups.0.flavors.0.resources.0.nominalQuota",
        "quote it as a string",
    ),
    (
        "unknown strategy",
        ClusterQueue,
        mutate(cq(), lambda o: o["spec"].update(queueingStrategy="FIFO")),
        "spec.queueingStrategy",
        "BestEffortFIFO",
    ),
    (
        "borrow preemption without reclaim",
        ClusterQueue,
        mutate(
            cq(),
            lambda o: o["spec"].update(
                preemption={"borrowWithinCohort": {"policy": "LowerPriority"}}
            ),
        ),
        "spec.preemption",
        queues.BORROW_PREEMPTION_NEEDS_RECLAIM.message,
    ),
    (
        "upper-case flavor name",
        ClusterQueue,
        cq(groups=[gpu_group("H100")]),
        "spec.resourceGroups.0.flavors.0.name",
        "pattern",
    ),
    (
        "local queue without cluster queue",
        LocalQueue,
        {"kind": "LocalQueue", "metadata": {"name": "l", "namespace": "n"}, "spec": {}},
        "spec.clusterQueue",
        "Field required",
    ),
    (
        "wrong kind",
        LocalQueue,
        {"kind": "ClusterQueue", "metadata": {"name": "l"}, "spec": {"clusterQueue": "q"}},
        "kind",
        "LocalQueue",
    ),
    (
        "topology without node labels",
        ResourceFlavor,
        {"kind": "ResourceFlavor", "metadata": {"name": "f"}, "spec": {"topologyName": "t"}},
        "spec",
        TOPOLOGY_NEEDS_NODE_LABELS.message,
    ),
    (
        "topology level twice",
        Topology,
        {
            "kind": "Topology",
            "metadata": {"name": "t"},
            "spec": {"levels": [{"nodeLabel": "rack"}, {"nodeLabel": "rack"}]},
        },
        "spec",
        LEVELS_UNIQUE.message,
    ),
    (
        "hostname not last",
        Topology,
        {
            "kind": "Topology",
            "metadata": {"name": "t"},
            "spec": {"levels": [{"nodeLabel": "kubernetes.io/hostname"}, {"nodeLabel": "rack"}]},
        },
        "spec",
        HOSTNAME_LAST.message,
    ),
    (
        "no topology levels",
        Topology,
        {"kind": "Topology", "metadata": {"name": "t"}, "spec": {"levels": []}},
        "spec.levels",
        "at least 1",
    ),
    (
        "duplicate pod set names",
        Workload,
        mutate(WORKLOAD, lambda o: o["spec"]["podSets"].append(o["spec"]["podSets"][0])),
        "spec",
        POD_SET_NAMES_UNIQUE.message,
    ),
    (
        "required and preferred topology",
        Workload,
        mutate(
            WORKLOAD,
            lambda o: o["spec"]["podSets"][0].update(
                topologyRequest={"required": "rack", "preferred": "block"}
            ),
        ),
        "spec.podSets.0.topologyRequest",
        ONE_TOPOLOGY_MODE.message,
    ),
    (
        "negative pod count",
        Workload,
        mutate(WORKLOAD, lambda o: o["spec"]["podSets"][0].update(count=-1)),
        "spec.podSets.0.count",
        "greater than or equal to 0",
    ),
    (
        "no pod sets",
        Workload,
        mutate(WORKLOAD, lambda o: o["spec"].update(podSets=[])),
        "spec.podSets",
        "at least 1",
    ),
]


@pytest.mark.parametrize(("case", "model", "obj", "where", "says"), BAD, ids=[c[0] for c in BAD])
def test_bad_objects_are_refused_with_the_field_and_a_way_out(
    case: str, model: type[Resource], obj: dict[str, Any], where: str, says: str
) -> None:
    with pytest.raises(ValidationError) as err:
        model.model_validate(obj)
    errors = err.value.errors()
    locs = [".".join(str(p) for p in e["loc"]) for e in errors]
    assert any(loc.startswith(where) for loc in locs), (case, locs)
    assert says in str(err.value), (case, str(err.value))


def test_limits_with_a_cohort_are_fine() -> None:
    ClusterQueue.model_validate(cq(groups=[gpu_group(borrowingLimit=4, lendingLimit=8)]))


def test_a_flavor_may_serve_two_queues_but_not_twice_in_one() -> None:
    ClusterQueue.model_validate(cq(groups=[gpu_group("h100", "a100")]))
