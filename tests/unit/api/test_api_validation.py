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
from queuectl.api.flavor import (
    CURRENCY_IS_CODE,
    HOSTNAME_LAST,
    LEVELS_UNIQUE,
    PRICE_IS_DECIMAL,
    TOPOLOGY_NEEDS_NODE_LABELS,
)
from queuectl.api.workload import (
    HOSTNAME_SLICE_INNERMOST,
    ONE_TOPOLOGY_MODE,
    POD_SET_NAMES_UNIQUE,
    SLICE_LEVELS_UNIQUE,
    SLICE_SIZES_DIVIDE,
    WHOLE_SLICES,
)


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


def sliced(count: int, slices: list[tuple[str, int]]) -> dict[str, Any]:
    """WORKLOAD with `count` pods in one block, in `slices` (level, size) outermost first."""
    request = {
        "required": "block",
        "podSetSliceRequiredTopologyConstraints": [{"topology": lv, "size": n} for lv, n in slices],
    }
    return mutate(
        WORKLOAD,
        lambda o: o["spec"]["podSets"][0].update(count=count, topologyRequest=request),
    )


# (case, model, object, where the error points, words it must contain)
BAD: list[tuple[str, type[Resource], dict[str, Any], str, str]] = [
    (
        "idle threshold of 0 %",
        ClusterQueue,
        mutate(
            cq(),
            lambda o: o["spec"].update(idlePolicy={"thresholdPercent": 0, "windowSeconds": 600}),
        ),
        "spec.idlePolicy.thresholdPercent",
        "greater than or equal to 1",
    ),
    (
        "idle window of 5 s",
        ClusterQueue,
        mutate(
            cq(), lambda o: o["spec"].update(idlePolicy={"thresholdPercent": 5, "windowSeconds": 5})
        ),
        "spec.idlePolicy.windowSeconds",
        "greater than or equal to 10",
    ),
    (
        "an idle action nobody knows",
        ClusterQueue,
        mutate(
            cq(),
            lambda o: o["spec"].update(
                idlePolicy={"thresholdPercent": 5, "windowSeconds": 600, "action": "Delete"}
            ),
        ),
        "spec.idlePolicy.action",
        "'Warn', 'Requeue' or 'Stop'",
    ),
    (
        "an idle policy without a window",
        ClusterQueue,
        mutate(cq(), lambda o: o["spec"].update(idlePolicy={"thresholdPercent": 5})),
        "spec.idlePolicy.windowSeconds",
        "Field required",
    ),
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
    *[
        (
            f"flavor price {case}",
            ResourceFlavor,
            {"kind": "ResourceFlavor", "metadata": {"name": "f"}, "spec": {"cost": cost}},
            "spec.cost",
            says,
        )
        for case, cost, says in [
            ("negative", {"gpuHourPrice": "-2.50"}, PRICE_IS_DECIMAL.message),
            ("not a number", {"gpuHourPrice": "cheap"}, PRICE_IS_DECIMAL.message),
            ("in exponent form", {"gpuHourPrice": "1e3"}, PRICE_IS_DECIMAL.message),
            (
                "in a lower-case currency",
                {"gpuHourPrice": "2", "currency": "usd"},
                CURRENCY_IS_CODE.message,
            ),
            ("missing", {"currency": "USD"}, "Field required"),
        ]
    ],
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
    *[
        (
            f"slices: {case}",
            Workload,
            sliced(count, slices),
            where,
            says,
        )
        for case, count, slices, where, says in [
            (
                "an inner size that does not divide the outer",
                16,
                [("rack", 8), ("clique", 3)],
                "spec.podSets.0.topologyRequest",
                SLICE_SIZES_DIVIDE.message,
            ),
            (
                "one level twice",
                16,
                [("rack", 8), ("rack", 4)],
                "spec.podSets.0.topologyRequest",
                SLICE_LEVELS_UNIQUE.message,
            ),
            (
                "the hostname outside another level",
                16,
                [("kubernetes.io/hostname", 8), ("rack", 4)],
                "spec.podSets.0.topologyRequest",
                HOSTNAME_SLICE_INNERMOST.message,
            ),
            (
                "four levels",
                16,
                [("block", 16), ("rack", 8), ("clique", 4), ("kubernetes.io/hostname", 2)],
                "spec.podSets.0.topologyRequest.podSetSliceRequiredTopologyConstraints",
                "at most 3",
            ),
            (
                "a count that is not whole slices",
                12,
                [("rack", 8)],
                "spec.podSets.0",
                WHOLE_SLICES.message,
            ),
            (
                "a slice of no pods",
                0,
                [("rack", 0)],
                "spec.podSets.0.topologyRequest.podSetSliceRequiredTopologyConstraints.0.size",
                "greater than or equal to 1",
            ),
        ]
    ],
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


def test_three_slice_levels_whose_sizes_divide_are_accepted() -> None:
    obj = mutate(
        WORKLOAD,
        lambda o: o["spec"]["podSets"][0].update(
            count=64,
            topologyRequest={
                "required": "block",
                "podSetSliceRequiredTopologyConstraints": [
                    {"topology": "rack", "size": 16},
                    {"topology": "clique", "size": 4},
                    {"topology": "kubernetes.io/hostname", "size": 2},
                ],
                "balancedPlacement": True,
            },
        ),
    )
    Workload.model_validate(obj)


def test_limits_with_a_cohort_are_fine() -> None:
    ClusterQueue.model_validate(cq(groups=[gpu_group(borrowingLimit=4, lendingLimit=8)]))


def test_a_flavor_may_serve_two_queues_but_not_twice_in_one() -> None:
    ClusterQueue.model_validate(cq(groups=[gpu_group("h100", "a100")]))
