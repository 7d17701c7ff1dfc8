"""Issue 7 e2e: a GPU fault reported by the node agent drains the node and moves the gang.

The agent's real node-reporting code (health state machine, Node patches) runs in this process
with a scripted reader standing in for NVML, against the real API server, for one kwok node;
the session controller (a real `queuectl controller` process, auto-drain on by default) reacts
to what the agent writes. The scenario uses four nodes of its own (a distinct product and pool
label, so no other test's flavor matches them) and its own flavor and ClusterQueue.
"""

from __future__ import annotations

import re
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest
from kubernetes_asyncio import client as ak8s
from kubernetes_asyncio import config as ak8s_config

from e2e.harness import (
    ControllerProcess,
    apply,
    cluster_queue,
    condition,
    get,
    gpu_job,
    local_queue,
    running_pods,
    wait_for,
    workload_of,
)
from queuectl.agent.health import HealthPolicy
from queuectl.agent.kube import KubeNodeClient
from queuectl.agent.scripted import ManualClock, ScriptedReader
from queuectl.agent.shell import Agent, AgentConfig, PassResult
from queuectl.api import names
from queuectl.testenv.cluster import Cluster

PRODUCT = "NVIDIA-H200"  # what the scripted H200 reports, so discovery agrees with the node
POOL = "e2e.queuectl.io/pool"
POLICY = HealthPolicy(recovery_passes=2, hold_down_s=60)


@pytest.fixture
async def api(control_plane: Cluster) -> AsyncIterator[ak8s.ApiClient]:
    configuration = ak8s.Configuration()
    await ak8s_config.load_kube_config(
        config_file=control_plane.kubeconfig, client_configuration=configuration
    )
    async with ak8s.ApiClient(configuration=configuration) as client:
        yield client


def metric(text: str, name: str, **labels: str) -> float:
    """One sample of the controller's /metrics (0 when the series is absent)."""
    want = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
    pattern = re.escape(name) + (r"\{" + re.escape(want) + r"\}" if want else "") + r" (\S+)$"
    for line in text.splitlines():
        m = re.match(pattern, line)
        if m:
            return float(m.group(1))
    return 0.0


def figures(controller: ControllerProcess) -> dict[str, float]:
    text = controller.metrics()
    return {
        "unhealthy": metric(text, "queuectl_unhealthy_gpus"),
        "drained": metric(text, "queuectl_nodes_drained_total", reason=names.REASON_GPU_XID),
        "evicted": metric(
            text, "queuectl_evicted_workloads_total", reason=names.REASON_EVICTED_NODE_FAILURES
        ),
    }


def our_taints(node: dict[str, Any]) -> list[dict[str, Any]]:
    return [t for t in node["spec"].get("taints") or [] if t["key"] == names.TAINT_GPU_UNHEALTHY]


async def step(agent: Agent, clock: ManualClock, seconds: float = 10) -> PassResult:
    clock.advance(seconds)
    return await agent.run_pass(wait_s=0)


async def test_xid_79_drains_the_node_and_the_gang_is_readmitted_whole_elsewhere(
    control_plane: Cluster,
    namespace: str,
    controller: ControllerProcess,
    api: ak8s.ApiClient,
) -> None:
    prefix = f"health{int(time.time()) % 100000}"
    nodes = control_plane.add_gpu_nodes(
        4, product=PRODUCT, memory_mib=143771, name_prefix=prefix, labels={POOL: prefix}
    )
    ours = {n.name for n in nodes}
    flavor = {
        "apiVersion": names.API_VERSION,
        "kind": "ResourceFlavor",
        "metadata": {"name": prefix},
        "spec": {"nodeLabels": {names.LABEL_GPU_PRODUCT: PRODUCT, POOL: prefix}},
    }
    cq = f"cq-{namespace}"
    apply(
        control_plane,
        flavor,
        cluster_queue(cq, namespace, {prefix: 32}),
        local_queue("lq", namespace, cq),
    )

    # A gang of two 8-GPU pods runs on two of the four nodes.
    apply(control_plane, gpu_job("gang", namespace, "lq", pods=2, gpus=8))
    pods = wait_for(
        "the gang running",
        lambda: (r := running_pods(control_plane, namespace, "gang")) and len(r) == 2 and r,
    )
    placed = {p["spec"]["nodeName"] for p in pods}
    assert len(placed) == 2 and placed <= ours
    bad = sorted(placed)[0]
    first = workload_of(control_plane, namespace, "gang")
    assert first is not None

    # The agent on that node: discovery labels it; it reports itself healthy.
    clock = ManualClock(time.time())
    reader = ScriptedReader.node("H200", 8, "nvswitch", clock=clock, seed=bad)
    agent = Agent(
        reader,
        AgentConfig(node_name=bad, policy=POLICY, resync_s=3600),
        KubeNodeClient(api),
        clock=clock,
    )
    assert await agent.start() is None
    assert (await step(agent, clock)).written
    labels = get(control_plane, "node", bad)["metadata"]["labels"]
    assert labels[names.LABEL_GPU_PRODUCT] == PRODUCT
    assert labels[names.LABEL_GPU_HEALTHY_COUNT] == "8"
    assert labels[names.LABEL_GPU_NVLINK] == names.NVLINK_CLASS_NVSWITCH
    assert labels[names.LABEL_GPU_FAMILY] == "hopper"
    before = wait_for("the controller's metrics", lambda: figures(controller))

    # XID 79 (GPU fell off the bus) on GPU 5: the agent taints the node.
    reader.xid(clock.now + 1, gpu=5, xid=79)
    assert (await step(agent, clock)).written
    node = get(control_plane, "node", bad)
    assert our_taints(node) == [
        {"key": names.TAINT_GPU_UNHEALTHY, "value": names.REASON_GPU_XID, "effect": "NoSchedule"}
    ]
    assert node["metadata"]["labels"][names.LABEL_GPU_HEALTHY_COUNT] == "7"

    # The controller cordons it, evicts the gang with NodeFailures and admits it again whole,
    # on nodes without the fault.
    wait_for(
        "the node cordoned by the controller",
        lambda: get(control_plane, "node", bad)["spec"].get("unschedulable") is True,
    )
    assert (
        names.ANNOTATION_NODE_DRAINED in get(control_plane, "node", bad)["metadata"]["annotations"]
    )

    def readmitted_elsewhere() -> list[dict[str, Any]] | None:
        wl = workload_of(control_plane, namespace, "gang")
        requeued = condition(wl or {}, names.COND_REQUEUED) or {}
        if requeued.get("reason") != names.REASON_EVICTED_NODE_FAILURES:
            return None
        if (condition(wl or {}, names.COND_ADMITTED) or {}).get("status") != "True":
            return None
        running = running_pods(control_plane, namespace, "gang")
        return running if len(running) == 2 else None

    running = wait_for("the gang re-admitted on healthy nodes", readmitted_elsewhere, timeout=90)
    new_nodes = {p["spec"]["nodeName"] for p in running}
    assert bad not in new_nodes and new_nodes <= ours
    wl = workload_of(control_plane, namespace, "gang")
    assert (
        wl is not None and wl["metadata"]["uid"] == first["metadata"]["uid"]
    )  # the same Workload, requeued
    # (re-admission flips Evicted back to False, keeping its reason)
    assert (condition(wl, names.COND_EVICTED) or {}).get("reason") == (
        names.REASON_EVICTED_NODE_FAILURES
    )

    after = wait_for(
        "the unhealthy-GPU metric to move",
        lambda: (f := figures(controller))["unhealthy"] >= before["unhealthy"] + 1 and f,
    )
    assert after["drained"] >= before["drained"] + 1
    assert after["evicted"] >= before["evicted"] + 1

    # Recovery: clean passes past the hold-down lift the taint; the controller uncordons.
    for _ in range(4):
        await step(agent, clock, 30)
    node = get(control_plane, "node", bad)
    assert not our_taints(node)
    assert node["metadata"]["labels"][names.LABEL_GPU_HEALTHY_COUNT] == "8"
    wait_for(
        "the controller to uncordon the recovered node",
        lambda: (
            not (n := get(control_plane, "node", bad))["spec"].get("unschedulable")
            and names.ANNOTATION_NODE_DRAINED not in (n["metadata"].get("annotations") or {})
        ),
    )
    wait_for(
        "the unhealthy-GPU metric to fall back",
        lambda: figures(controller)["unhealthy"] <= before["unhealthy"],
    )
    await agent.close()
    control_plane.kubectl("delete", "job", "gang", "-n", namespace, "--wait=false")
