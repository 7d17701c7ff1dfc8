"""pytest fixtures for tests that need a real cluster (registered by the repo's conftest.py).

- `control_plane` (session): a `Cluster`; the one named by QUEUECTL_KUBECONFIG if set (e.g. from
  `queuectl dev up`, for fast local iteration), else a `ControlPlane` started for this session.
- `kubeconfig` (session): its admin kubeconfig path.
- `k8s_client` (session): a synchronous `kubernetes.client.ApiClient`.
- `namespace` (function): a fresh namespace whose default service account exists.
- `gpu_nodes` (session): a standard fake GPU fleet (see `StandardFleet`).
- `helm` (session): the path of a `helm` binary (built from its Go module and cached once).
- `operators` (session): `operators(name)` makes sure that workload operator (jobset, lws, ray,
  training-operator, mpi-operator, trainer) runs against the session's cluster; the ones a
  test names with `@pytest.mark.operator("jobset", ...)` are built before the test loop.

A test that uses any of these is marked `cluster`. If the cluster cannot start the test ERRORS
with the reason; it is never skipped. The first build of the binaries happens before the test
loop, so it is not charged to any test's timeout; so is Helm's, when a test uses `helm`.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import re
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client as k8s

from queuectl.testenv import operatorbuild, operatorrun
from queuectl.testenv import operators as operator_table
from queuectl.testenv.build import Binaries, ensure_binaries
from queuectl.testenv.cluster import Cluster
from queuectl.testenv.controlplane import ControlPlane
from queuectl.testenv.errors import TestEnvError
from queuectl.testenv.helm import HELM_V3, HELM_V4, ensure_helm
from queuectl.testenv.nodebuild import ensure_node_binaries
from queuectl.testenv.nodes import A100, H100, FakeNode

CLUSTER_FIXTURES = frozenset(
    {"control_plane", "kubeconfig", "k8s_client", "namespace", "gpu_nodes", "operators"}
)
EXTERNAL_KUBECONFIG_ENV = "QUEUECTL_KUBECONFIG"
LABEL_TEST_NAMESPACE = "testenv.queuectl.io/test"

_binaries: Binaries | None = None
_build_error: TestEnvError | None = None
_helms: dict[str, Path | TestEnvError] = {}
# Each Helm fixture and the release it gives: `helm` is v3, what most platform teams run.
HELM_FIXTURES = {"helm": HELM_V3, "helm4": HELM_V4}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if CLUSTER_FIXTURES.intersection(_fixtures(item)):
            item.add_marker(pytest.mark.cluster)


def _fixtures(item: pytest.Item) -> set[str]:
    """The fixtures a test uses: its argument names less those it is parametrized with (a
    table's `namespace` column is a value, not the `namespace` fixture)."""
    names = set(getattr(item, "fixturenames", ()))
    callspec = getattr(item, "callspec", None)
    return names - set(callspec.params) if callspec is not None else names


@pytest.hookimpl(tryfirst=True)
def pytest_runtestloop(session: pytest.Session) -> None:
    """Build (or find cached) binaries once, outside every test's timeout."""
    global _binaries, _build_error
    if session.config.option.collectonly:
        return
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")

    def progress(line: str) -> None:
        if reporter is not None:
            reporter.write_line(line)

    for fixture, release in HELM_FIXTURES.items():
        if any(fixture in getattr(item, "fixturenames", ()) for item in session.items):
            try:
                _helms[fixture] = ensure_helm(progress, release=release)
            except TestEnvError as exc:
                _helms[fixture] = exc  # reported by every test that uses it as its setup error
    if os.environ.get(EXTERNAL_KUBECONFIG_ENV):
        return
    if not any(item.get_closest_marker("cluster") for item in session.items):
        return
    try:
        _binaries = ensure_binaries(progress)
    except TestEnvError as exc:
        _build_error = exc  # reported by every cluster test as its setup error
        return
    wanted = {n for item in session.items for m in item.iter_markers("operator") for n in m.args}
    for name in operator_table.parse_names(",".join(sorted(wanted))) if wanted else []:
        # Built outside any test's timeout; a failure is reported again by `operators(name)`.
        with contextlib.suppress(TestEnvError):
            operatorbuild.build(name, progress)
    if any(item.get_closest_marker("real_node") for item in session.items):
        # kubelet & co. also build outside any test's timeout; on an error the real-node
        # fixture calls it again and reports the error as its own.
        with contextlib.suppress(TestEnvError):
            ensure_node_binaries(progress)


@dataclass(frozen=True)
class StandardFleet:
    """2 blocks x 2 racks x 2 nodes of 8 H100, plus 2 nodes of 8 A100 (one block, one rack)."""

    h100: list[FakeNode]
    a100: list[FakeNode]

    @property
    def all(self) -> list[FakeNode]:
        return [*self.h100, *self.a100]


def _external(kubeconfig: str) -> Cluster:
    cluster = Cluster(kubeconfig)
    try:
        with cluster.api_client() as api:
            k8s.VersionApi(api).get_code()
    except Exception as exc:
        raise TestEnvError(
            f"{EXTERNAL_KUBECONFIG_ENV}={kubeconfig} names a cluster that does not answer ({exc})",
            "start it with `queuectl dev up`, or unset the variable to start one per session",
        ) from exc
    return cluster


@pytest.fixture(scope="session")
def control_plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    external = os.environ.get(EXTERNAL_KUBECONFIG_ENV)
    if external:
        yield _external(external)
        return
    if _build_error is not None:
        raise _build_error
    plane = ControlPlane(tmp_path_factory.mktemp("controlplane"), binaries=_binaries)
    atexit.register(plane.stop)  # also on an interrupted session; stop() is idempotent
    plane.start()
    try:
        yield plane
    finally:
        plane.stop()


def _helm_of(fixture: str) -> Path:
    found = _helms.get(fixture) or ensure_helm(release=HELM_FIXTURES[fixture])
    if isinstance(found, TestEnvError):
        raise found
    return found


@pytest.fixture(scope="session")
def helm() -> Path:
    """Helm v3 (HELM_V3), built once from its Go module."""
    return _helm_of("helm")


@pytest.fixture(scope="session")
def helm4() -> Path:
    """Helm v4 (HELM_V4), built once from its Go module."""
    return _helm_of("helm4")


@pytest.fixture(scope="session")
def kubeconfig(control_plane: Cluster) -> str:
    return control_plane.kubeconfig


@pytest.fixture(scope="session")
def k8s_client(control_plane: Cluster) -> Iterator[k8s.ApiClient]:
    with control_plane.api_client() as api:
        yield api


def _namespace_name(test_name: str) -> str:
    stem = re.sub(r"[^a-z0-9-]+", "-", test_name.lower()).strip("-")[:40].strip("-")
    return f"t-{stem}-{uuid.uuid4().hex[:6]}"


@pytest.fixture
def namespace(
    control_plane: Cluster, k8s_client: k8s.ApiClient, request: pytest.FixtureRequest
) -> Iterator[str]:
    core = k8s.CoreV1Api(k8s_client)
    name = _namespace_name(request.node.name)
    body: dict[str, Any] = {"metadata": {"name": name, "labels": {LABEL_TEST_NAMESPACE: "true"}}}
    core.create_namespace(body)  # type: ignore[arg-type]
    control_plane.wait_for_service_account(name)
    yield name
    core.delete_namespace(name, propagation_policy="Background")


@pytest.fixture(scope="session")
def gpu_nodes(control_plane: Cluster) -> StandardFleet:
    h100 = control_plane.add_gpu_nodes(
        8, 8, H100, 81559, blocks=2, racks_per_block=2, name_prefix="h100"
    )
    a100 = control_plane.add_gpu_nodes(2, 8, A100, 81920, name_prefix="a100")
    return StandardFleet(h100=h100, a100=a100)


@pytest.fixture(scope="session")
def operators(control_plane: Cluster) -> Callable[[str], None]:
    """`operators(name)`: that operator runs against this session's cluster from now on.

    On a cluster this session started it is built (once), its CRDs installed and it is started
    as a process, stopped with the cluster. A cluster from QUEUECTL_KUBECONFIG must already run
    it (`queuectl dev up --operators NAME`); its CRDs being there is taken as the sign.
    """
    running: set[str] = set()

    def ensure(name: str) -> None:
        if isinstance(control_plane, ControlPlane):
            operatorrun.ensure_running(control_plane, name)  # again if it died since
        elif name in running:
            return
        elif not operatorrun.crds_installed(control_plane, name):
            raise TestEnvError(
                f"the cluster from {EXTERNAL_KUBECONFIG_ENV} does not run the {name} operator",
                f"start it with `queuectl dev up --operators {name}` or unset the variable",
            )
        running.add(name)

    return ensure
