"""The few core/v1 and meta/v1 shapes our resources embed: label selectors, taints, tolerations.

Modelled (not passed through as opaque dicts) so the CRD schema validates them and the
controller can read them with types.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from typing import Final

from pydantic import Field

from queuectl.api.base import MAX_LABEL_VALUE_LENGTH, MAX_NAME_LENGTH, KubeModel
from queuectl.api.selectors import selector_matches

MAX_SELECTOR_TERMS: Final = 16
MAX_SELECTOR_VALUES: Final = 64


class SelectorOperator(StrEnum):
    IN = "In"
    NOT_IN = "NotIn"
    EXISTS = "Exists"
    DOES_NOT_EXIST = "DoesNotExist"


class LabelSelectorRequirement(KubeModel):
    """One set-based term of a label selector."""

    key: str = Field(max_length=MAX_NAME_LENGTH)
    operator: SelectorOperator
    values: list[str] | None = Field(default=None, max_length=MAX_SELECTOR_VALUES)


class LabelSelector(KubeModel):
    """A metav1.LabelSelector. An empty selector matches everything."""

    match_labels: dict[str, str] | None = Field(default=None, max_length=MAX_SELECTOR_TERMS)
    match_expressions: list[LabelSelectorRequirement] | None = Field(
        default=None, max_length=MAX_SELECTOR_TERMS
    )

    def matches(self, labels: Mapping[str, str]) -> bool:
        """Whether an object with these labels is selected (the apimachinery semantics, as
        `queuectl.api.selectors.selector_matches` applies them to the stored dict)."""
        return selector_matches(self.to_api(), labels)


class TaintEffect(StrEnum):
    NO_SCHEDULE = "NoSchedule"
    PREFER_NO_SCHEDULE = "PreferNoSchedule"
    NO_EXECUTE = "NoExecute"


class Taint(KubeModel):
    """A node taint that nodes of a flavor carry; workloads must tolerate it to use the flavor."""

    key: str = Field(max_length=MAX_NAME_LENGTH)
    value: str | None = Field(default=None, max_length=MAX_LABEL_VALUE_LENGTH)
    effect: TaintEffect


class TolerationOperator(StrEnum):
    EXISTS = "Exists"
    EQUAL = "Equal"


class Toleration(KubeModel):
    """A core/v1 Toleration, injected into admitted pods for the chosen flavor."""

    key: str | None = Field(default=None, max_length=MAX_NAME_LENGTH)
    operator: TolerationOperator | None = None
    value: str | None = Field(default=None, max_length=MAX_LABEL_VALUE_LENGTH)
    effect: TaintEffect | None = None
    toleration_seconds: int | None = None
