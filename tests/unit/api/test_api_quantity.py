"""Quantities become exact integers in one unit per resource; bad spellings are refused."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from queuectl.api.quantity import QuantityError, canonical, parse, to_decimal, unit_of

GiB = 1024**3


@pytest.mark.parametrize(
    ("resource", "value", "expected"),
    [
        ("cpu", 8, 8000),
        ("cpu", "8", 8000),
        ("cpu", "500m", 500),
        ("cpu", "0.5", 500),
        ("cpu", "1.5", 1500),
        ("cpu", "0.0001", 1),  # below a millicore rounds up, as the API server does
        ("cpu", "1k", 1_000_000),
        ("memory", "80Gi", 80 * GiB),
        ("memory", "1G", 10**9),
        ("memory", "1.5Gi", GiB * 3 // 2),
        ("memory", 1024, 1024),
        ("memory", "1e3", 1000),
        ("memory", "500m", 1),  # half a byte rounds up
        ("ephemeral-storage", "10Gi", 10 * GiB),
        ("hugepages-2Mi", "4Mi", 4 * 1024**2),
        ("nvidia.com/gpu", 8, 8),
        ("nvidia.com/gpu", "8", 8),
        ("nvidia.com/gpu", "+2", 2),
        ("nvidia.com/gpu", "1k", 1000),
        ("pods", "110", 110),
        ("nvidia.com/gpu", 0, 0),
    ],
)
def test_canonical_units(resource: str, value: int | str, expected: int) -> None:
    assert canonical(resource, value) == expected


@pytest.mark.parametrize(
    ("resource", "value", "says"),
    [
        ("nvidia.com/gpu", "0.5", "not a whole number"),
        ("nvidia.com/gpu", "500m", "not a whole number"),
        ("pods", "1.5", "not a whole number"),
        ("cpu", "-1", "negative"),
        ("memory", -5, "negative"),
        ("cpu", 0.5, "floating-point"),  # unquoted YAML 0.5
        ("cpu", True, "not a quantity"),
        ("cpu", None, "not a quantity"),
        ("memory", "80GB", "not a quantity"),
        ("memory", "1K", "not a quantity"),  # the API server only knows k, Ki
        ("memory", " 8", "not a quantity"),
        ("cpu", "NaN", "not a quantity"),
        ("cpu", "", "not a quantity"),
        ("cpu", "1" * 100, "not a quantity"),
    ],
)
def test_bad_quantities_say_what_to_do(resource: str, value: object, says: str) -> None:
    with pytest.raises(QuantityError) as err:
        canonical(resource, value)
    assert says in str(err.value)
    # every message ends with a way out, not just a complaint
    assert any(w in str(err.value) for w in ("write", "request", "quote", "must be"))


def test_units_per_resource() -> None:
    assert [unit_of(r) for r in ("cpu", "memory", "hugepages-1Gi", "nvidia.com/gpu", "pods")] == [
        "millicores",
        "bytes",
        "bytes",
        "count",
        "count",
    ]


def test_weights_are_exact_decimals() -> None:
    assert to_decimal("0.5") * 2 == 1
    assert to_decimal(3) == 3
    with pytest.raises(QuantityError):
        to_decimal("-1")


@settings(max_examples=200)
@given(st.integers(min_value=0, max_value=10**12))
def test_millicores_and_binary_suffixes_are_exact(n: int) -> None:
    assert canonical("cpu", f"{n}m") == n
    assert canonical("memory", f"{n}Ki") == n * 1024
    assert canonical("nvidia.com/gpu", n) == canonical("nvidia.com/gpu", str(n)) == n


@settings(max_examples=200)
@given(st.integers(min_value=0, max_value=10**6), st.integers(min_value=0, max_value=999))
def test_decimal_cpu_equals_millicores(whole: int, milli: int) -> None:
    assert canonical("cpu", f"{whole}.{milli:03d}") == whole * 1000 + milli
    assert parse(f"{whole}.{milli:03d}") * 1000 == canonical("cpu", f"{whole}.{milli:03d}")
