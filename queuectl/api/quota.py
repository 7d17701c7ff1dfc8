"""Quota as ClusterQueues and Cohorts declare it: resource groups of flavors of resources.

Each rule is stated once (:class:`Rule`): the CEL goes into the CRD so the API server refuses a
bad object, and the Python validators raise the same message, so webhooks, the CLI and the
controller explain a mistake in the same words as ``kubectl apply`` does.
"""

from __future__ import annotations

from typing import Annotated, Final

from pydantic import AfterValidator, ConfigDict, Field, model_validator

from queuectl.api.base import MAX_NAME_LENGTH, KubeModel, Rule, cel_rules
from queuectl.api.quantity import Quantity, QuantityError, canonical, parse

MAX_RESOURCE_GROUPS: Final = 16
MAX_FLAVORS_PER_GROUP: Final = 16
MAX_RESOURCES_PER_FLAVOR: Final = 16

# A DNS-1123 subdomain: how flavors, cohorts and queues are named (and it bounds CEL cost).
DNS_SUBDOMAIN_PATTERN: Final = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
# A qualified resource name such as cpu, memory or nvidia.com/gpu.
RESOURCE_NAME_PATTERN: Final = (
    r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
    r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$"
)

ObjectName = Annotated[
    str, Field(min_length=1, max_length=MAX_NAME_LENGTH, pattern=DNS_SUBDOMAIN_PATTERN)
]
ResourceName = Annotated[
    str, Field(min_length=1, max_length=MAX_NAME_LENGTH, pattern=RESOURCE_NAME_PATTERN)
]

LENDING_WITHIN_NOMINAL: Final = Rule(
    "!has(self.lendingLimit) || !isQuantity(string(self.lendingLimit)) || "
    "!isQuantity(string(self.nominalQuota)) || "
    "!quantity(string(self.lendingLimit)).isGreaterThan(quantity(string(self.nominalQuota)))",
    "lendingLimit must not exceed nominalQuota: a queue can lend at most the quota it owns",
)
_WHOLE: Final = (
    "!has(self.{f}) || !isQuantity(string(self.{f})) || quantity(string(self.{f})).isInteger()"
)
DEVICES_WHOLE: Final = Rule(
    "self.name in ['cpu', 'memory', 'ephemeral-storage', 'storage'] || "
    "self.name.startsWith('hugepages-') || ("
    + " && ".join(
        f"({_WHOLE.format(f=f)})" for f in ("nominalQuota", "borrowingLimit", "lendingLimit")
    )
    + ")",
    "devices and counts cannot be split: give whole numbers for resources other than "
    "cpu and memory",
)
RESOURCES_ONCE_PER_FLAVOR: Final = Rule(
    "self.resources.all(r, self.resources.filter(x, x.name == r.name).size() == 1)",
    "a resource is listed more than once in this flavor; list each resource once",
)
COVERED_RESOURCES_ONCE: Final = Rule(
    "self.coveredResources.all(c, self.coveredResources.filter(x, x == c).size() == 1)",
    "coveredResources lists a resource more than once; list each resource once",
)
FLAVORS_LIST_COVERED_RESOURCES: Final = Rule(
    "self.flavors.all(f, f.resources.size() == self.coveredResources.size() && "
    "f.resources.all(r, r.name in self.coveredResources))",
    "every flavor of a resource group must give a quota for exactly the group's coveredResources",
)
FLAVOR_ONCE: Final = Rule(
    "self.all(rg, rg.flavors.all(f, "
    "self.map(o, o.flavors.filter(g, g.name == f.name).size()).sum() == 1))",
    "a flavor is listed more than once; list each flavor once, in a single resource group",
)
RESOURCE_IN_ONE_GROUP: Final = Rule(
    "self.all(rg, rg.coveredResources.all(c, self.filter(o, c in o.coveredResources).size() == 1))",
    "a resource is covered by more than one resource group; cover each resource in one group only",
)


def limits_need_parent(parent_field: str, what: str) -> Rule:
    """borrowingLimit/lendingLimit only make sense with somewhere to borrow from or lend to."""
    return Rule(
        f"has(self.{parent_field}) || !has(self.resourceGroups) || "
        "self.resourceGroups.all(rg, rg.flavors.all(f, f.resources.all(r, "
        "!has(r.borrowingLimit) && !has(r.lendingLimit))))",
        f"borrowingLimit and lendingLimit need a {what}: set spec.{parent_field} "
        "or remove the limits",
    )


class ResourceQuota(KubeModel):
    """The quota of one resource in one flavor."""

    model_config = ConfigDict(json_schema_extra=cel_rules(LENDING_WITHIN_NOMINAL, DEVICES_WHOLE))

    name: ResourceName
    """The resource, e.g. cpu, memory or nvidia.com/gpu."""
    nominal_quota: Quantity
    """What this queue owns."""
    borrowing_limit: Quantity | None = None
    """How much above nominalQuota it may borrow from its cohort; unset means no limit."""
    lending_limit: Quantity | None = None
    """How much of nominalQuota others may borrow; unset means all of it."""

    @model_validator(mode="after")
    def _check(self) -> ResourceQuota:
        try:
            self.canonical_limits()
        except QuantityError as err:  # signs were checked by Quantity: this is a split device
            raise ValueError(f"{DEVICES_WHOLE.message} ({err})") from err
        # Exact comparison, as CEL's quantity library does (canonical values are rounded up).
        if self.lending_limit is not None and parse(self.lending_limit) > parse(self.nominal_quota):
            raise ValueError(
                f"{LENDING_WITHIN_NOMINAL.message} ({self.name}: lendingLimit "
                f"{self.lending_limit} > nominalQuota {self.nominal_quota})"
            )
        return self

    def canonical_limits(self) -> tuple[int, int | None, int | None]:
        """(nominal, borrowing limit, lending limit) in canonical integers; None = unlimited."""

        def conv(q: int | str | None) -> int | None:
            return None if q is None else canonical(self.name, q)

        return (
            canonical(self.name, self.nominal_quota),
            conv(self.borrowing_limit),
            conv(self.lending_limit),
        )


class FlavorQuotas(KubeModel):
    """The quotas a queue holds in one ResourceFlavor."""

    model_config = ConfigDict(json_schema_extra=cel_rules(RESOURCES_ONCE_PER_FLAVOR))

    name: ObjectName
    """The ResourceFlavor."""
    resources: list[ResourceQuota] = Field(min_length=1, max_length=MAX_RESOURCES_PER_FLAVOR)

    @model_validator(mode="after")
    def _check(self) -> FlavorQuotas:
        seen = [r.name for r in self.resources]
        dupes = sorted({n for n in seen if seen.count(n) > 1})
        if dupes:
            raise ValueError(f"{RESOURCES_ONCE_PER_FLAVOR.message} (flavor {self.name}: {dupes})")
        return self


class ResourceGroup(KubeModel):
    """Resources whose quotas go together; flavors are tried in the listed order."""

    model_config = ConfigDict(
        json_schema_extra=cel_rules(COVERED_RESOURCES_ONCE, FLAVORS_LIST_COVERED_RESOURCES)
    )

    covered_resources: list[ResourceName] = Field(min_length=1, max_length=MAX_RESOURCES_PER_FLAVOR)
    flavors: list[FlavorQuotas] = Field(min_length=1, max_length=MAX_FLAVORS_PER_GROUP)

    @model_validator(mode="after")
    def _check(self) -> ResourceGroup:
        covered = self.covered_resources
        if len(set(covered)) != len(covered):
            raise ValueError(COVERED_RESOURCES_ONCE.message)
        for flavor in self.flavors:
            if {r.name for r in flavor.resources} != set(covered):
                raise ValueError(
                    f"{FLAVORS_LIST_COVERED_RESOURCES.message} (flavor {flavor.name} lists "
                    f"{[r.name for r in flavor.resources]}, the group covers {covered})"
                )
        return self


def _check_groups(groups: list[ResourceGroup]) -> list[ResourceGroup]:
    flavors = [f.name for g in groups for f in g.flavors]
    dupes = sorted({n for n in flavors if flavors.count(n) > 1})
    if dupes:
        raise ValueError(f"{FLAVOR_ONCE.message} (repeated: {dupes})")
    resources = [r for g in groups for r in set(g.covered_resources)]
    dupes = sorted({r for r in resources if resources.count(r) > 1})
    if dupes:
        raise ValueError(f"{RESOURCE_IN_ONE_GROUP.message} (repeated: {dupes})")
    return groups


ResourceGroups = Annotated[
    list[ResourceGroup],
    Field(
        max_length=MAX_RESOURCE_GROUPS,
        json_schema_extra=cel_rules(FLAVOR_ONCE, RESOURCE_IN_ONE_GROUP),
    ),
    AfterValidator(_check_groups),
]


def has_limits(groups: list[ResourceGroup]) -> bool:
    """Whether any quota sets a borrowing or lending limit."""
    return any(
        r.borrowing_limit is not None or r.lending_limit is not None
        for g in groups
        for f in g.flavors
        for r in f.resources
    )


class FairSharing(KubeModel):
    """Weight of this node when siblings compete for borrowed quota (higher gets more)."""

    weight: Quantity = 1
    """A non-negative number, e.g. 1, 3 or '0.5'. 0 means: borrow only what nobody else wants."""
