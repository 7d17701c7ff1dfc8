"""ResourceFlavor (a kind of node, e.g. H100 machines) and Topology (how nodes are grouped)."""

from __future__ import annotations

import re
from typing import Final, Literal

from pydantic import ConfigDict, Field, model_validator

from queuectl.api import names
from queuectl.api.base import MAX_NAME_LENGTH, KubeModel, Resource, Rule, cel_rules
from queuectl.api.corev1 import Taint, Toleration
from queuectl.api.quota import ObjectName, ResourceName

MAX_NODE_LABELS: Final = 8
MAX_TAINTS: Final = 8
MAX_TOLERATIONS: Final = 8
MAX_TOPOLOGY_LEVELS: Final = 8

TOPOLOGY_NEEDS_NODE_LABELS: Final = Rule(
    "!has(self.topologyName) || (has(self.nodeLabels) && size(self.nodeLabels) > 0)",
    "topologyName needs nodeLabels: say which nodes belong to this flavor before "
    "placing them in a topology",
)
GPU_RESOURCE_IS_NVIDIA: Final = Rule(
    "!has(self.gpuResource) || (self.gpuResource.startsWith('nvidia.com/') && "
    "self.gpuResource != 'nvidia.com/gpu')",
    "gpuResource names the NVIDIA device that stands in for nvidia.com/gpu on this flavor, "
    "such as nvidia.com/mig-3g.40gb or nvidia.com/gpu.shared",
)
LEVELS_UNIQUE: Final = Rule(
    "self.levels.all(l, self.levels.filter(x, x.nodeLabel == l.nodeLabel).size() == 1)",
    "a topology level is listed more than once; list each node label once",
)
PRICE_PATTERN: Final = r"^[0-9]{1,9}([.][0-9]{1,6})?$"
PRICE_IS_DECIMAL: Final = Rule(
    f"self.gpuHourPrice.matches('{PRICE_PATTERN}')",
    'gpuHourPrice is the non-negative price of one GPU-hour as a decimal string, such as "2.50"',
)
CURRENCY_PATTERN: Final = r"^[A-Z]{3}$"
CURRENCY_IS_CODE: Final = Rule(
    f"self.currency.matches('{CURRENCY_PATTERN}')",
    "currency is a three-letter ISO 4217 code in capitals, such as USD or EUR",
)
HOSTNAME_LAST: Final = Rule(
    f"self.levels.all(l, l.nodeLabel != '{names.LABEL_HOSTNAME}' || "
    f"self.levels[self.levels.size() - 1].nodeLabel == '{names.LABEL_HOSTNAME}')",
    f"{names.LABEL_HOSTNAME} can only be the last (finest) topology level",
)


class FlavorCost(KubeModel):
    """What one GPU-hour on this flavor costs, for chargeback (`queuectl report`, the cost
    counters). Reports price all past use at the current price: change it and history is
    re-priced."""

    model_config = ConfigDict(json_schema_extra=cel_rules(PRICE_IS_DECIMAL, CURRENCY_IS_CODE))

    gpu_hour_price: str = Field(max_length=16)
    """Price of one GPU-hour (one nvidia.com/gpu of quota held for an hour), e.g. "2.50"."""
    currency: str = Field(default="USD", max_length=3)
    """ISO 4217 code of the price."""

    @model_validator(mode="after")
    def _check(self) -> FlavorCost:
        if not re.fullmatch(PRICE_PATTERN, self.gpu_hour_price):
            raise ValueError(f"{PRICE_IS_DECIMAL.message} (got {self.gpu_hour_price!r})")
        if not re.fullmatch(CURRENCY_PATTERN, self.currency):
            raise ValueError(f"{CURRENCY_IS_CODE.message} (got {self.currency!r})")
        return self

    @property
    def price(self) -> float:
        return float(self.gpu_hour_price)


class ResourceFlavorSpec(KubeModel):
    """Which nodes a flavor stands for and what a pod needs to land on them."""

    model_config = ConfigDict(
        json_schema_extra=cel_rules(TOPOLOGY_NEEDS_NODE_LABELS, GPU_RESOURCE_IS_NVIDIA)
    )

    node_labels: dict[str, str] | None = Field(default=None, max_length=MAX_NODE_LABELS)
    """Labels of the flavor's nodes; injected as required node affinity on admission."""
    node_taints: list[Taint] | None = Field(default=None, max_length=MAX_TAINTS)
    """Taints of the flavor's nodes; a workload must tolerate them to be admitted here."""
    tolerations: list[Toleration] | None = Field(default=None, max_length=MAX_TOLERATIONS)
    """Tolerations injected into admitted pods."""
    topology_name: ObjectName | None = None
    """The Topology that groups this flavor's nodes (enables topology-aware placement)."""
    gpu_resource: ResourceName | None = None
    """The device serving nvidia.com/gpu on this flavor's nodes (nvidia.com/mig-3g.40gb): pods admitted here ask for it instead; quota stays in nvidia.com/gpu."""  # noqa: E501
    cost: FlavorCost | None = None
    """Price per GPU-hour for chargeback; without it the flavor's GPU-hours cost nothing."""

    @model_validator(mode="after")
    def _check(self) -> ResourceFlavorSpec:
        if self.topology_name is not None and not self.node_labels:
            raise ValueError(TOPOLOGY_NEEDS_NODE_LABELS.message)
        gpu = self.gpu_resource
        if gpu is not None and (not gpu.startswith("nvidia.com/") or gpu == "nvidia.com/gpu"):
            raise ValueError(GPU_RESOURCE_IS_NVIDIA.message)
        return self


class ResourceFlavor(Resource):
    """A kind of node (GPU model, spot or on-demand ...) that quota is given in."""

    kind: Literal["ResourceFlavor"] = "ResourceFlavor"
    spec: ResourceFlavorSpec = Field(default_factory=ResourceFlavorSpec)


class TopologyLevel(KubeModel):
    """One level of the hierarchy, named by the node label whose value names the domain."""

    node_label: str = Field(min_length=1, max_length=MAX_NAME_LENGTH)


class TopologySpec(KubeModel):
    """Levels from coarse to fine, e.g. block, rack, kubernetes.io/hostname."""

    model_config = ConfigDict(json_schema_extra=cel_rules(LEVELS_UNIQUE, HOSTNAME_LAST))

    levels: list[TopologyLevel] = Field(min_length=1, max_length=MAX_TOPOLOGY_LEVELS)

    @model_validator(mode="after")
    def _check(self) -> TopologySpec:
        labels = [level.node_label for level in self.levels]
        if len(set(labels)) != len(labels):
            raise ValueError(LEVELS_UNIQUE.message)
        if names.LABEL_HOSTNAME in labels[:-1]:
            raise ValueError(HOSTNAME_LAST.message)
        return self

    def level_labels(self) -> list[str]:
        """The node labels, coarse to fine."""
        return [level.node_label for level in self.levels]


class Topology(Resource):
    """How nodes are grouped (block > rack > host) for placing a gang in one domain."""

    kind: Literal["Topology"] = "Topology"
    spec: TopologySpec
