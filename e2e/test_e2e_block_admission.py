"""All-or-nothing start on the real control plane: with `--pods-ready-block-admission`, while
an admitted gang's pods are not all Ready, the next gang in the same flavor waits (reason
WaitingForPodsReady) although its quota is free; once the first is evicted for its startup
timeout, the next is admitted and runs.

One 8-GPU H100 node (tainted, so only this test's flavor reaches it) and a ClusterQueue of 8
GPUs with a 10-second startup timeout; two 4-GPU jobs, the first of which the real
kube-scheduler cannot place.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from e2e.harness import (
    POOL,
    ControllerProcess,
    admitted,
    apply,
    cluster_queue,
    flavor,
    gpu_job,
    in_pool,
    local_queue,
    pool_taint,
    running_controller,
    running_pods,
    wait_for,
    wait_for_pending_reason,
)
from e2e.test_e2e_pods_ready import evicted_for_pods_ready
from queuectl.api import names
from queuectl.testenv.cluster import Cluster
from queuectl.testenv.nodes import H100


@pytest.fixture(scope="module")
def controller(
    control_plane: Cluster, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ControllerProcess]:
    """This module's controller, with block admission on."""
    log_dir = tmp_path_factory.mktemp("controller-block")
    with running_controller(control_plane, log_dir, ["--pods-ready-block-admission"]) as proc:
        yield proc


def test_the_next_gang_waits_until_the_starting_one_is_evicted(
    control_plane: Cluster, controller: ControllerProcess, namespace: str
) -> None:
    prefix = f"ba-{namespace}"[:40].rstrip("-")
    control_plane.add_gpu_nodes(
        1, name_prefix=prefix, labels={POOL: prefix}, taints=[pool_taint(prefix)]
    )
    cq = f"cq-{namespace}"
    apply(
        control_plane,
        in_pool(flavor(prefix, H100), prefix),
        cluster_queue(cq, namespace, {prefix: 8}, waitForPodsReady={"timeoutSeconds": 10}),
        local_queue("lq", namespace, cq),
    )
    stuck = gpu_job("stuck", namespace, "lq", gpus=4)
    stuck["spec"]["template"]["spec"]["nodeSelector"] = {"e2e.queuectl.io/nowhere": "true"}
    apply(control_plane, stuck)
    wait_for("stuck admitted", lambda: admitted(control_plane, namespace, "stuck"))
    apply(control_plane, gpu_job("next", namespace, "lq", gpus=4))  # its 4 GPUs are free

    _, message = wait_for_pending_reason(
        control_plane, namespace, "next", names.REASON_WAITING_FOR_PODS_READY
    )
    assert "stuck" in message and prefix in message
    assert not admitted(control_plane, namespace, "next")

    wait_for(
        "stuck evicted for PodsReadyTimeout",
        lambda: evicted_for_pods_ready(control_plane, namespace, "stuck"),
        timeout=60,
    )
    wait_for("next admitted", lambda: admitted(control_plane, namespace, "next"), timeout=60)
    wait_for("next running", lambda: running_pods(control_plane, namespace, "next"))
