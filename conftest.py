"""Repo-wide pytest setup: the real local control plane fixtures (queuectl.testenv), the
tiers' one rule: tests/unit needs no cluster (`make test-unit` must run on a bare machine), and
what a parallel run (pytest-xdist, `make test-unit`) must not change."""

import os
from pathlib import Path

import pytest

pytest_plugins = ["queuectl.testenv.pytest_plugin"]

UNIT = Path(__file__).parent / "tests" / "unit"


def pytest_configure(config: pytest.Config) -> None:
    """A pytest-xdist worker starts with COLUMNS=80, which a serial run does not have: the CLI
    would cut its tables to 80 columns there and nowhere else."""
    if os.environ.get("PYTEST_XDIST_WORKER"):
        os.environ.pop("COLUMNS", None)


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    misplaced = [
        item.nodeid
        for item in items
        if item.get_closest_marker("cluster") and UNIT in Path(str(item.path)).parents
    ]
    if misplaced:
        raise pytest.UsageError(
            "tests under tests/unit must not need a cluster (make test-unit runs them without "
            "one); move these to tests/integration: " + ", ".join(misplaced)
        )
