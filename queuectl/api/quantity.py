"""Kubernetes resource quantities: validation and canonical integers.

Quota arithmetic must be exact, so every quantity becomes an integer in one canonical unit:
cpu in millicores, memory-like resources in bytes, everything else (``nvidia.com/gpu``, ``pods``)
in whole counts. Parsing is delegated to the ``kubernetes`` package; a regular expression with the
API server's own grammar runs first, because that parser also accepts spellings the API server
refuses (``1K``, ``NaN``, leading blanks), and the CRDs must agree with the Python side.
"""

from __future__ import annotations

import math
import re
from decimal import Decimal
from typing import Annotated, Any, Final

from kubernetes.utils.quantity import parse_quantity
from pydantic import BeforeValidator, WithJsonSchema

_NUMBER: Final = r"(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))"
_SUFFIX: Final = rf"(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?{_NUMBER}))"
# The grammar of k8s.io/apimachinery resource.Quantity, signs included.
QUANTITY_PATTERN: Final = rf"^(\+|-)?{_NUMBER}{_SUFFIX}?$"
QUANTITY_MAX_LENGTH: Final = 64

_QUANTITY_RE: Final = re.compile(QUANTITY_PATTERN)

CPU: Final = "cpu"
MEMORY: Final = "memory"
EPHEMERAL_STORAGE: Final = "ephemeral-storage"
STORAGE: Final = "storage"
_BYTE_RESOURCES: Final = frozenset({MEMORY, EPHEMERAL_STORAGE, STORAGE})
_HUGEPAGES_PREFIX: Final = "hugepages-"

HOW_TO_WRITE: Final = "write a Kubernetes quantity such as 8, '500m' or '80Gi'"


class QuantityError(ValueError):
    """A value that is not a usable quantity; the message says what to write instead."""


def unit_of(resource_name: str) -> str:
    """The canonical unit of a resource: ``millicores``, ``bytes`` or ``count``."""
    if resource_name == CPU:
        return "millicores"
    if resource_name in _BYTE_RESOURCES or resource_name.startswith(_HUGEPAGES_PREFIX):
        return "bytes"
    return "count"


def parse(value: object) -> Decimal:
    """Parse an int or a quantity string exactly; refuse floats, bools and foreign spellings."""
    if isinstance(value, bool) or not isinstance(value, int | str):
        if isinstance(value, float):
            raise QuantityError(
                f"{value!r} is a floating-point number; quote it as a string "
                f"(e.g. '{value}') or {HOW_TO_WRITE}"
            )
        raise QuantityError(f"{value!r} is not a quantity; {HOW_TO_WRITE}")
    if isinstance(value, int):
        return Decimal(value)
    if len(value) > QUANTITY_MAX_LENGTH or not _QUANTITY_RE.match(value):
        raise QuantityError(f"{value!r} is not a quantity; {HOW_TO_WRITE}")
    try:
        return Decimal(parse_quantity(value))  # type: ignore[no-untyped-call]
    except ValueError as err:  # the regex should have caught it; keep the message useful
        raise QuantityError(f"{value!r} is not a quantity ({err}); {HOW_TO_WRITE}") from err


def canonical(resource_name: str, value: object) -> int:
    """The quantity as an integer in the resource's canonical unit.

    cpu -> millicores, memory/ephemeral-storage/storage/hugepages-* -> bytes, anything else ->
    a count, which must be whole ('0.5' GPUs is an error). Sub-unit remainders of cpu and bytes
    round up, as the API server does. Negative values are errors: quota and usage never are.
    """
    amount = parse(value)
    if amount < 0:
        raise QuantityError(
            f"{resource_name}: {value!r} is negative; quotas and requests must be 0 or more"
        )
    unit = unit_of(resource_name)
    if unit == "millicores":
        return math.ceil(amount * 1000)
    if unit == "bytes":
        return math.ceil(amount)
    if amount != amount.to_integral_value():
        raise QuantityError(
            f"{resource_name}: {value!r} is not a whole number; devices and counts cannot be "
            "split, request a whole number such as 1"
        )
    return int(amount)


def to_decimal(value: object) -> Decimal:
    """A non-negative quantity as an exact Decimal (for weights, which are not resources)."""
    amount = parse(value)
    if amount < 0:
        raise QuantityError(f"{value!r} is negative; it must be 0 or more")
    return amount


def _check_non_negative(value: Any) -> int | str:
    """Validate but keep the user's spelling, so objects round-trip unchanged."""
    to_decimal(value)
    return value  # type: ignore[no-any-return]


NON_NEGATIVE_QUANTITY_MESSAGE: Final = (
    "must be a quantity of 0 or more, such as 8, '500m' or '80Gi'"
)
# CEL rather than a regex pattern, so a refused value gets a sentence, not a regex.
INT_OR_STRING_SCHEMA: Final[dict[str, Any]] = {
    "x-kubernetes-int-or-string": True,
    "anyOf": [{"type": "integer"}, {"type": "string"}],
    "maxLength": QUANTITY_MAX_LENGTH,
    "x-kubernetes-validations": [
        {
            "rule": "isQuantity(string(self)) && !quantity(string(self)).isLessThan(quantity('0'))",
            "message": NON_NEGATIVE_QUANTITY_MESSAGE,
        }
    ],
}

Quantity = Annotated[
    int | str,
    BeforeValidator(_check_non_negative),
    WithJsonSchema(INT_OR_STRING_SCHEMA),
]
"""A non-negative quantity as written by the user (int or string); see :func:`canonical`."""
