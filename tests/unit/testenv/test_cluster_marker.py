"""Which tests need the cluster: a test that asks for a cluster fixture does, a table whose
column happens to share a fixture's name does not (it would start a control plane for nothing,
and put a unit test in the cluster tier)."""

from __future__ import annotations

from typing import Any

import pytest

from queuectl.testenv import pytest_plugin
from queuectl.testenv.cluster import Cluster


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


@pytest.mark.parametrize(
    ("manifest", "path"), [(None, None), ({"kind": "List", "items": []}, "crds.yaml")]
)
def test_a_server_side_apply_takes_a_manifest_or_a_path(manifest: Any, path: str | None) -> None:
    with pytest.raises(ValueError, match="a manifest or a path, not both or neither"):
        Cluster("/nonexistent/kubeconfig").apply_server_side(manifest, path=path)
