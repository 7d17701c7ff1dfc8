"""The bypass fuzzer at CI size: for each job kind, a workload fills an 8-GPU ClusterQueue and
a second waits; a seeded sample of the generated mutations (fields of the kind, its children
and its pods; our keys; ownerReferences; gates; scale) is tried as a plain user, and no GPU
pod may run beyond what was admitted, or on another flavor's nodes.

`python -m bench bypass` runs the whole list (docs/design/testenv.md, "The bypass fuzzer").
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest
from kubernetes import client as k8s

from bench.bypass.fuzz import CI, fuzz_kind
from bench.bypass.kinds import CASES
from bench.bypass.world import Pool, client_of
from e2e.harness import ControllerProcess
from queuectl.testenv.cluster import Cluster
from queuectl.testenv.invariants import Sampler

OPERATORS = ("jobset", "lws", "ray", "training-operator", "mpi-operator", "trainer")
pytestmark = pytest.mark.operator(*OPERATORS)


@pytest.fixture(scope="module")
def kinds_served(operators: Callable[[str], None]) -> None:
    """The operators, before the controller starts: it then watches their kinds at once."""
    for name in OPERATORS:
        operators(name)


@pytest.fixture(scope="module")
def pool(
    kinds_served: None,
    controller: ControllerProcess,
    control_plane: Cluster,
    k8s_client: k8s.ApiClient,
) -> Pool:
    """Once the controller has installed our CRDs: the fuzzer's tainted H100 and A100 nodes,
    its flavor, RBAC and TrainJob runtimes."""
    rest, _ = client_of(k8s_client)
    pool = Pool(rest).setup(control_plane.add_gpu_nodes, h100_nodes=4)
    pool.add_runtimes()
    return pool


@pytest.fixture(scope="module")
def sampler(pool: Pool, k8s_client: k8s.ApiClient) -> Iterator[Sampler]:
    found = Sampler(k8s_client, [], interval=0.5, gpus_by_namespace=True).start()
    yield found
    found.stop()


@pytest.mark.parametrize("kind", list(CASES))
def test_no_sampled_mutation_runs_more_gpus_than_admitted(
    kind: str, pool: Pool, sampler: Sampler, k8s_client: k8s.ApiClient
) -> None:
    rest, user = client_of(k8s_client)
    lines: list[str] = []
    report = fuzz_kind(rest, user, pool, CASES[kind], sampler, CI, lines.append)
    assert not report.error.startswith("world"), report.error
    assert report.outcomes, f"{kind}: no mutation was tried ({report.error})"
    broken = [f"{o.category} {o.role}: {o.what}: {o.detail}" for o in report.violations]
    assert not broken, "\n".join(broken)
