"""Which tests need the cluster: a test that asks for a cluster fixture does, a table whose
column happens to share a fixture's name does not (it would start a control plane for nothing,
and put a unit test in the cluster tier)."""

from __future__ import annotations

import pytest

from queuectl.testenv import pytest_plugin


class FakeItem:
    def __init__(self, fixturenames: list[str], params: dict[str, object] | None) -> None:
        self.fixturenames = fixturenames
        if params is not None:
            self.callspec = type("CallSpec", (), {"params": params})()


@pytest.mark.parametrize(
    ("fixturenames", "params", "cluster"),
    [
        (["namespace", "k8s_client"], None, True),
        (["namespace"], {"namespace": "team-a"}, False),
        (["namespace", "gpu_nodes"], {"namespace": "team-a"}, True),
        (["tmp_path"], None, False),
    ],
    ids=["asks for fixtures", "a column named namespace", "a column and a fixture", "no cluster"],
)
def test_a_table_column_is_not_a_cluster_fixture(
    fixturenames: list[str], params: dict[str, object] | None, cluster: bool
) -> None:
    used = pytest_plugin._fixtures(FakeItem(fixturenames, params))  # type: ignore[arg-type]
    assert bool(pytest_plugin.CLUSTER_FIXTURES & used) is cluster
