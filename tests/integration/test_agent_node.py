"""The agent's node reporting against the real API server, on one kwok GPU node.

A scripted reader stands in for NVML (no GPU here); everything from the health state machine to
the Node patches is the real code, and the API server is the real one, so merge-patch semantics,
the status subresource, the taint list precondition and kwok's own status updates are all real.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client as k8s
from kubernetes_asyncio import client as ak8s
from kubernetes_asyncio import config as ak8s_config

from queuectl.agent.health import HealthPolicy
from queuectl.agent.kube import KubeNodeClient
from queuectl.agent.nvmlemu import build_library, environment, write_description
from queuectl.agent.scripted import ManualClock, ScriptedReader
from queuectl.agent.shell import Agent, AgentConfig, PassResult
from queuectl.api import names
from queuectl.cli.main import main
from queuectl.testenv import Cluster, eventually

ROOT = Path(__file__).resolve().parents[2]
SCENARIO = ROOT / "queuectl" / "agent" / "scenarios" / "h100-xid79.yaml"
HGX_H100 = ROOT / "queuectl" / "agent" / "scenarios" / "hgx-h100.yaml"
POLICY = HealthPolicy(recovery_passes=2, hold_down_s=60)
FOREIGN_TAINT = {"key": "example.com/maintenance", "value": "planned", "effect": "PreferNoSchedule"}


@pytest.fixture
async def api(control_plane: Cluster) -> AsyncIterator[ak8s.ApiClient]:
    configuration = ak8s.Configuration()
    await ak8s_config.load_kube_config(
        config_file=control_plane.kubeconfig, client_configuration=configuration
    )
    async with ak8s.ApiClient(configuration=configuration) as client:
        yield client


def read_node(k8s_client: k8s.ApiClient, name: str) -> dict[str, Any]:
    node = k8s.CoreV1Api(k8s_client).read_node(name)
    data: dict[str, Any] = k8s_client.sanitize_for_serialization(node)  # type: ignore[no-untyped-call]
    return data


def gpu_condition(node: dict[str, Any]) -> dict[str, Any] | None:
    conditions = node.get("status", {}).get("conditions") or []
    return next((c for c in conditions if c["type"] == names.NODE_CONDITION_GPU_HEALTHY), None)


def our_taints(node: dict[str, Any]) -> list[dict[str, Any]]:
    return [t for t in node["spec"].get("taints") or [] if t["key"] == names.TAINT_GPU_UNHEALTHY]


async def step(agent: Agent, clock: ManualClock, seconds: float = 10) -> PassResult:
    clock.advance(seconds)
    return await agent.run_pass(wait_s=0)


async def test_labels_appear_xid_79_taints_and_recovery_untaints(
    control_plane: Cluster,
    k8s_client: k8s.ApiClient,
    api: ak8s.ApiClient,
) -> None:
    (fake,) = control_plane.add_gpu_nodes(1, name_prefix=f"agent{int(time.time()) % 100000}")
    clock = ManualClock(time.time())
    reader = ScriptedReader.node("H100", 8, "nvswitch", clock=clock, seed=fake.name)
    config = AgentConfig(node_name=fake.name, policy=POLICY, resync_s=3600)
    agent = Agent(reader, config, KubeNodeClient(api), clock=clock)
    assert await agent.start() is None

    # Discovery: the node is labelled as found, and reports itself healthy.
    first = await step(agent, clock)
    assert first.written
    node = read_node(k8s_client, fake.name)
    labels = node["metadata"]["labels"]
    assert labels[names.LABEL_GPU_PRODUCT] == "NVIDIA-H100-80GB-HBM3"
    assert labels[names.LABEL_GPU_NVLINK] == names.NVLINK_CLASS_NVSWITCH
    assert labels[names.LABEL_GPU_HEALTHY_COUNT] == "8"
    assert labels[names.LABEL_GPU_FAMILY] == "hopper"
    assert '"NV18"' in node["metadata"]["annotations"][names.ANNOTATION_GPU_TOPOLOGY_MATRIX]
    cond = gpu_condition(node)
    assert cond is not None and (cond["status"], cond["reason"]) == ("True", "AllGPUsHealthy")
    assert not our_taints(node)
    assert not (await step(agent, clock)).written  # nothing changed, nothing written

    # Someone else taints the node after the agent last read it: the agent's taint write is
    # refused (resourceVersion precondition), and the next pass re-reads and keeps their taint.
    control_plane.kubectl(
        "taint", "node", fake.name, "example.com/maintenance=planned:PreferNoSchedule"
    )
    reader.xid(clock.now + 1, gpu=3, xid=79)
    refused = await step(agent, clock)
    assert refused.patch is not None and not refused.patch.empty and not refused.written
    assert (await step(agent, clock)).written

    node = read_node(k8s_client, fake.name)
    assert our_taints(node) == [
        {"key": names.TAINT_GPU_UNHEALTHY, "value": "CriticalXid", "effect": "NoSchedule"}
    ]
    assert FOREIGN_TAINT in node["spec"]["taints"]
    assert node["metadata"]["labels"][names.LABEL_GPU_HEALTHY_COUNT] == "7"
    cond = gpu_condition(node)
    assert cond is not None and (cond["status"], cond["reason"]) == ("False", "CriticalXid")
    assert "GPU 3" in cond["message"] and "XID 79" in cond["message"]
    ready = [c for c in node["status"]["conditions"] if c["type"] == "Ready"]
    assert ready and ready[0]["status"] == "True"  # the kubelet's (kwok's) conditions untouched

    # kwok keeps updating the node's status; our condition must survive that.
    time.sleep(3)
    assert (gpu_condition(read_node(k8s_client, fake.name)) or {}).get("status") == "False"

    # Recovery: clean passes past the 60 s hold-down remove the taint, and only ours.
    for _ in range(5):
        await step(agent, clock, 15)
    node = eventually(
        lambda: read_node(k8s_client, fake.name),
        lambda n: not our_taints(n),
        timeout=10,
        what="the unhealthy taint is removed",
    )
    assert FOREIGN_TAINT in node["spec"]["taints"]
    assert node["metadata"]["labels"][names.LABEL_GPU_HEALTHY_COUNT] == "8"
    assert names.ANNOTATION_GPU_HEALTH not in node["metadata"].get("annotations", {})
    cond = gpu_condition(node)
    assert cond is not None and cond["status"] == "True"
    await agent.close()


async def test_a_node_without_nvml_reports_unknown_and_keeps_its_labels(
    control_plane: Cluster,
    k8s_client: k8s.ApiClient,
    api: ak8s.ApiClient,
) -> None:
    (fake,) = control_plane.add_gpu_nodes(1, name_prefix=f"nonvml{int(time.time()) % 100000}")
    before = read_node(k8s_client, fake.name)["metadata"]["labels"]
    clock = ManualClock(time.time())
    reader = ScriptedReader.node(clock=clock, unavailable="NVML Shared Library Not Found")
    agent = Agent(reader, AgentConfig(node_name=fake.name), KubeNodeClient(api), clock=clock)
    assert await agent.start() is not None
    await agent.report_unavailable()
    node = read_node(k8s_client, fake.name)
    cond = gpu_condition(node)
    assert cond is not None and (cond["status"], cond["reason"]) == ("Unknown", "NVMLUnavailable")
    assert node["metadata"]["labels"] == before
    assert not our_taints(node)


def test_once_reads_the_node_and_writes_only_when_asked(
    control_plane: Cluster,
    k8s_client: k8s.ApiClient,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """`queuectl agent --once` as a person would run it against a cluster: a dry run lists the
    exact changes and writes nothing; `--write` applies them; then there is nothing left to do."""
    (fake,) = control_plane.add_gpu_nodes(1, name_prefix=f"once{int(time.time()) % 100000}")
    argv = [
        "agent",
        "--once",
        "--json",
        "--scripted",
        str(SCENARIO),
        "--node-name",
        fake.name,
        "--kubeconfig",
        control_plane.kubeconfig,
    ]
    assert main(argv) == 0
    dry = json.loads(capsys.readouterr().out)
    assert dry["mode"] == "dry-run" and not dry["written"]
    assert any("set taint gpu.queuectl.io/unhealthy=CriticalXid" in c for c in dry["changes"])
    assert not our_taints(read_node(k8s_client, fake.name))

    assert main([*argv, "--write"]) == 0
    wrote = json.loads(capsys.readouterr().out)
    assert wrote["written"]
    node = read_node(k8s_client, fake.name)
    assert [t["value"] for t in our_taints(node)] == ["CriticalXid"]
    assert node["metadata"]["labels"][names.LABEL_GPU_HEALTHY_COUNT] == "7"


def test_the_agent_daemon_on_an_emulated_hgx_h100_labels_then_taints_for_xid_79(
    control_plane: Cluster, k8s_client: k8s.ApiClient, tmp_path: Path
) -> None:
    """`queuectl agent` as the DaemonSet runs it, in its own process, its NVML the emulator (the
    unmodified nvidia-ml-py through LD_LIBRARY_PATH): it labels the node from what NVML reports,
    and when the emulated clock reaches GPU 3's XID 79 (t=120 s; started at t=110) it taints it."""
    (fake,) = control_plane.add_gpu_nodes(1, name_prefix=f"emu{int(time.time()) % 100000}")
    env = environment(
        write_description(HGX_H100, tmp_path / "node.emu"), build_library(), offset=110
    )
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    argv = [sys.executable, "-m", "queuectl.cli.main", "agent", "--node-name", fake.name]
    argv += ["--kubeconfig", control_plane.kubeconfig, "--metrics-port", "0", "--poll-seconds", "1"]
    with (tmp_path / "agent.log").open("w") as log:
        daemon = subprocess.Popen(argv, env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        node = eventually(
            lambda: read_node(k8s_client, fake.name),
            lambda n: n["metadata"]["labels"].get(names.LABEL_GPU_NVLINK) is not None,
            what="the agent labels the node",
        )
        labels = node["metadata"]["labels"]
        assert labels[names.LABEL_GPU_PRODUCT] == "NVIDIA-H100-80GB-HBM3"
        assert labels[names.LABEL_GPU_NVLINK] == names.NVLINK_CLASS_NVSWITCH
        node = eventually(
            lambda: read_node(k8s_client, fake.name),
            our_taints,
            what="the XID 79 taints the node",
        )
        assert [t["value"] for t in our_taints(node)] == ["CriticalXid"]
        assert node["metadata"]["labels"][names.LABEL_GPU_HEALTHY_COUNT] == "7"
        cond = gpu_condition(node)
        assert cond is not None and "GPU 3" in cond["message"] and "XID 79" in cond["message"]
    finally:
        daemon.terminate()
        daemon.wait(timeout=30)
    assert daemon.returncode == 0, (tmp_path / "agent.log").read_text()
