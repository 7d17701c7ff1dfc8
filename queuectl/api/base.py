"""The shared base of every queuectl model: camelCase wire names, metadata and conditions.

Models read objects exactly as the API server returns them (``Model.model_validate(obj)``) and
write them back (``model.to_api()``). Unknown fields are ignored rather than refused, so a
controller built against an older schema keeps working when a newer CRD adds a field.
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Any, ClassVar, Final, Literal, NamedTuple, Self

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

# Bounds that keep CEL cost estimates small and objects readable.
MAX_NAME_LENGTH: Final = 253  # DNS subdomain: object names, label keys with prefix
MAX_LABEL_VALUE_LENGTH: Final = 63
MAX_MESSAGE_LENGTH: Final = 32768
MAX_REASON_LENGTH: Final = 1024
MAX_CONDITIONS: Final = 16
INT32_MAX: Final = 2**31 - 1


class Rule(NamedTuple):
    """A validation rule stated once: CEL for the API server, message for both sides."""

    cel: str
    message: str

    def schema(self) -> dict[str, str]:
        return {"rule": self.cel, "message": self.message}


def cel_rules(*rules: Rule) -> dict[str, Any]:
    """``json_schema_extra`` that puts the rules into the generated CRD schema."""
    return {"x-kubernetes-validations": [r.schema() for r in rules]}


class KubeModel(BaseModel):
    """snake_case in Python, camelCase on the wire; both accepted when reading."""

    model_config = ConfigDict(
        alias_generator=to_camel,
        validate_by_name=True,
        validate_by_alias=True,
        serialize_by_alias=True,
        extra="ignore",
        use_attribute_docstrings=True,
    )

    def to_api(self) -> dict[str, Any]:
        """The object as the API server wants it: camelCase, no nulls, JSON types only."""
        return self.model_dump(by_alias=True, exclude_none=True, mode="json")


class OwnerReference(KubeModel):
    """Who owns this object (a Workload is owned by its Job)."""

    api_version: str
    kind: str
    name: str
    uid: str
    controller: bool | None = None
    block_owner_deletion: bool | None = None


class ObjectMeta(KubeModel):
    """The metadata fields queuectl reads; anything else (managedFields ...) is kept as is."""

    model_config = ConfigDict(extra="allow")

    name: str | None = None
    generate_name: str | None = None
    namespace: str | None = None
    labels: dict[str, str] | None = None
    annotations: dict[str, str] | None = None
    uid: str | None = None
    resource_version: str | None = None
    generation: int | None = None
    creation_timestamp: datetime | None = None
    deletion_timestamp: datetime | None = None
    finalizers: list[str] | None = None
    owner_references: list[OwnerReference] | None = None


class ConditionStatus(StrEnum):
    TRUE = "True"
    FALSE = "False"
    UNKNOWN = "Unknown"


_CONDITION_TYPE_PATTERN: Final = (
    r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
    r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$"
)
_REASON_PATTERN: Final = r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$"


class Condition(KubeModel):
    """A Kubernetes condition (metav1.Condition shape)."""

    type: str = Field(max_length=316, pattern=_CONDITION_TYPE_PATTERN)
    status: ConditionStatus
    reason: str = Field(max_length=MAX_REASON_LENGTH, pattern=_REASON_PATTERN)
    message: str = Field(default="", max_length=MAX_MESSAGE_LENGTH)
    last_transition_time: datetime
    observed_generation: int | None = Field(default=None, ge=0)


CONDITIONS_SCHEMA: Final[dict[str, Any]] = {
    "x-kubernetes-list-type": "map",
    "x-kubernetes-list-map-keys": ["type"],
}


def conditions_field() -> Any:
    """A conditions list keyed by type, as Kubernetes conventions want."""
    return Field(
        default_factory=list, max_length=MAX_CONDITIONS, json_schema_extra=CONDITIONS_SCHEMA
    )


def find_condition(conditions: list[Condition], type_: str) -> Condition | None:
    """The condition of that type, if present."""
    return next((c for c in conditions if c.type == type_), None)


def is_true(conditions: list[Condition], type_: str) -> bool:
    """Whether the condition of that type is present and True."""
    cond = find_condition(conditions, type_)
    return cond is not None and cond.status == ConditionStatus.TRUE


class Resource(KubeModel):
    """A top-level queuectl object. Subclasses declare ``kind`` as a one-value Literal."""

    NAMESPACED: ClassVar[bool] = False

    api_version: Literal["queuectl.io/v1beta1"] = "queuectl.io/v1beta1"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)

    @classmethod
    def named(cls, name: str, namespace: str | None = None, **fields: Any) -> Self:
        """A convenience constructor for tests and the CLI."""
        return cls(metadata=ObjectMeta(name=name, namespace=namespace), **fields)
