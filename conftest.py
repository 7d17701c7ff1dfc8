"""Repo-wide pytest setup: the real local control plane fixtures (queuectl.testenv), and the
tiers' one rule: tests/unit needs no cluster (`make test-unit` must run on a bare machine)."""

from pathlib import Path

import pytest

pytest_plugins = ["queuectl.testenv.pytest_plugin"]

UNIT = Path(__file__).parent / "tests" / "unit"


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
