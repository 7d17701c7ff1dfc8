"""GPU time banking on the real control plane: the balance a controller wrote to the
ClusterQueue's status survives a SIGKILL and restart (the new leader starts from it)."""

from __future__ import annotations

import re

from e2e.harness import (
    ControllerProcess,
    apply,
    cluster_queue,
    flavor,
    get,
    local_queue,
    wait_for,
)
from queuectl.testenv.cluster import Cluster
from queuectl.testenv.nodes import H100
from queuectl.testenv.pytest_plugin import StandardFleet

CAP = 5.0
PAUSE_ACCRUAL = '{"spec": {"gpuTimeBank": {"accrualRate": 0, "capGPUHours": 5}}}'


def balance(cluster: Cluster, cq: str) -> float | None:
    bank = (get(cluster, "clusterqueue", cq).get("status") or {}).get("gpuTimeBank") or {}
    value = bank.get("balanceGPUHours")
    return None if value is None else float(value)


def gauge(controller: ControllerProcess, cq: str) -> float | None:
    pattern = rf'queuectl_cluster_queue_gpu_time_bank_gpu_hours{{cluster_queue="{cq}"}} (\S+)'
    found = re.search(pattern, controller.metrics())
    return None if found is None else float(found.group(1))


def test_a_gpu_time_balance_survives_a_controller_restart(
    control_plane: Cluster, namespace: str, gpu_nodes: StandardFleet, controller: ControllerProcess
) -> None:
    cq = f"cq-{namespace}"
    # 8 idle nominal GPUs at 1000 GPU-hours an hour each fill the bank in about 2 s
    bank = {"accrualRate": 1000, "capGPUHours": CAP}
    apply(
        control_plane,
        flavor("h100", H100),
        cluster_queue(cq, namespace, {"h100": 8}, gpuTimeBank=bank),
        local_queue("lq", namespace, cq),
    )
    wait_for("the full bank is written", lambda: balance(control_plane, cq) == CAP, timeout=90)
    printed = control_plane.kubectl("get", "clusterqueue", cq).stdout
    assert "BANK" in printed and " 5 " in printed  # the Bank printer column

    # From now on the queue earns nothing: a restarted controller that did not read the
    # balance back would start from zero and stay there.
    control_plane.kubectl("patch", "clusterqueue", cq, "--type=merge", "-p", PAUSE_ACCRUAL)
    controller.kill()
    controller.start(timeout=90)  # waits out the dead leader's Lease
    wait_for(
        "the new leader reports the restored balance",
        lambda: gauge(controller, cq) == CAP,
        timeout=60,
    )
    assert balance(control_plane, cq) == CAP
