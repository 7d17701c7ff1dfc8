"""The async shell on a scripted node and an in-memory Node: what it writes, when, and what it
does when NVML is missing or a GPU call never returns."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from queuectl import metrics
from queuectl.agent import nodestate
from queuectl.agent.health import HealthPolicy
from queuectl.agent.kube import Conflict
from queuectl.agent.nodestate import NodePatch, NodeView
from queuectl.agent.scripted import ManualClock, ScriptedReader
from queuectl.agent.shell import STATUS_NVML_UNAVAILABLE, STATUS_OK, Agent, AgentConfig
from queuectl.api import names

POLICY = HealthPolicy(recovery_passes=2, hold_down_s=30)


class MemoryNode:
    """A NodeClient over one in-memory Node; counts writes, can refuse one with a conflict."""

    def __init__(self, view: NodeView | None = None) -> None:
        self.view = view or NodeView(
            labels={"kubernetes.io/hostname": "gpu-0"}, resource_version="1"
        )
        self.patches: list[NodePatch] = []
        self.conflicts = 0

    async def get(self, name: str) -> NodeView:
        return self.view

    async def patch(self, name: str, patch: NodePatch) -> NodeView:
        if self.conflicts:
            self.conflicts -= 1
            raise Conflict("the object has been modified")
        self.patches.append(patch)
        self.view = nodestate.apply(self.view, patch)
        return self.view


def make_agent(
    node: MemoryNode | None = None, **reader_kw: Any
) -> tuple[Agent, ScriptedReader, ManualClock]:
    clock = ManualClock()
    reader = ScriptedReader.node("H100", 8, "nvswitch", clock=clock, seed="shell", **reader_kw)
    config = AgentConfig(node_name="gpu-0", policy=POLICY, poll_s=0, call_timeout_s=5)
    return Agent(reader, config, node, clock=clock, collector=metrics.GpuCollector()), reader, clock


async def passes(agent: Agent, clock: ManualClock, n: int, every: float = 10) -> None:
    for _ in range(n):
        clock.advance(every)
        await agent.run_pass(wait_s=0)


async def test_xid_79_taints_the_node_and_recovery_untaints_it_writing_only_changes() -> None:
    node = MemoryNode()
    agent, reader, clock = make_agent(node)
    assert await agent.start() is None and agent.status == STATUS_OK
    await passes(agent, clock, 1)
    assert len(node.patches) == 1
    assert node.view.labels[names.LABEL_GPU_HEALTHY_COUNT] == "8"
    await passes(agent, clock, 3)
    assert len(node.patches) == 1  # nothing changed: nothing written

    reader.xid(clock.now + 1, gpu=3, xid=79)
    await passes(agent, clock, 1)
    assert node.view.labels[names.LABEL_GPU_HEALTHY_COUNT] == "7"
    assert [t["value"] for t in node.view.taints] == ["CriticalXid"]
    assert node.view.condition(names.NODE_CONDITION_GPU_HEALTHY)["status"] == "False"  # type: ignore[index]
    writes = len(node.patches)
    await passes(agent, clock, 2)  # clean, but inside the 30 s hold-down
    assert node.view.taints and len(node.patches) == writes
    await passes(agent, clock, 1)
    assert node.view.taints == []
    assert node.view.labels[names.LABEL_GPU_HEALTHY_COUNT] == "8"
    assert names.ANNOTATION_GPU_HEALTH not in node.view.annotations


async def test_xid_13_changes_nothing_on_the_node() -> None:
    node = MemoryNode()
    agent, reader, clock = make_agent(node)
    await agent.start()
    await passes(agent, clock, 1)
    reader.xid(clock.now + 1, gpu=0, xid=13)
    await passes(agent, clock, 2)
    assert len(node.patches) == 1


async def test_a_restarted_agent_keeps_the_taint_through_the_hold_down() -> None:
    node = MemoryNode()
    agent, reader, clock = make_agent(node)
    await agent.start()
    reader.dbe(clock.now + 1, gpu=6)
    await passes(agent, clock, 1)
    assert node.view.taints
    again, _, clock2 = make_agent(node)  # same seed, same UUIDs
    clock2.now = clock.now + 5
    await again.start()
    await passes(again, clock2, 2)  # two clean passes, but the hold-down restarted at start
    assert node.view.taints
    await passes(again, clock2, 2)
    assert not node.view.taints


async def test_a_conflict_is_retried_on_the_next_pass() -> None:
    node = MemoryNode()
    agent, _, clock = make_agent(node)
    await agent.start()
    node.conflicts = 1
    await passes(agent, clock, 1)
    assert node.patches == []
    await passes(agent, clock, 1)
    assert len(node.patches) == 1


async def test_a_gpu_call_that_never_returns_reads_as_not_answering() -> None:
    node = MemoryNode()
    agent, reader, clock = make_agent(node)
    agent.config = AgentConfig(node_name="gpu-0", policy=POLICY, poll_s=0, call_timeout_s=0.2)
    await agent.start()
    reader.hang(clock.now + 1, gpu=2)
    try:
        await passes(agent, clock, 1)
        assert node.view.taints == [
            {"key": names.TAINT_GPU_UNHEALTHY, "value": "GPUNotAnswering", "effect": "NoSchedule"}
        ]
        assert "no answer within 0.2 s" in node.view.annotations[names.ANNOTATION_GPU_HEALTH]
    finally:
        reader.release()


async def test_without_nvml_the_agent_reports_unknown_once_and_idles_until_stopped() -> None:
    node = MemoryNode()
    agent, _, _ = make_agent(node, unavailable="NVML Shared Library Not Found")
    stop = asyncio.Event()
    task = asyncio.create_task(agent.run(stop))
    await asyncio.sleep(0.2)
    assert not task.done() and agent.status == STATUS_NVML_UNAVAILABLE
    cond = node.view.condition(names.NODE_CONDITION_GPU_HEALTHY)
    assert cond is not None and (cond["status"], cond["reason"]) == ("Unknown", "NVMLUnavailable")
    assert len(node.patches) == 1 and node.view.taints == []
    stop.set()
    await asyncio.wait_for(task, 5)


async def test_the_loop_runs_passes_until_stopped() -> None:
    node = MemoryNode()
    agent, _, _ = make_agent(node)
    agent.config = AgentConfig(node_name="gpu-0", policy=POLICY, poll_s=0.05, call_timeout_s=5)
    stop = asyncio.Event()
    task = asyncio.create_task(agent.run(stop))
    for _ in range(600):  # generous: the machine may be busy
        await asyncio.sleep(0.05)
        if node.patches:
            break
    stop.set()
    await asyncio.wait_for(task, 5)
    assert node.view.labels[names.LABEL_GPU_PRODUCT] == "NVIDIA-H100-80GB-HBM3"
    assert not agent.reader.opened  # type: ignore[attr-defined]


async def test_without_write_the_patch_is_computed_but_not_sent() -> None:
    node = MemoryNode()
    agent, _, clock = make_agent(node)
    agent.write = False
    await agent.start()
    clock.advance(10)
    result = await agent.run_pass(wait_s=0)
    assert result.patch is not None and not result.patch.empty and not result.written
    assert node.patches == []


async def test_gpu_metrics_follow_the_pass() -> None:
    agent, reader, clock = make_agent(None)
    await agent.start()
    reader.xid(clock.now + 1, gpu=1, xid=79)
    reader.dbe(clock.now + 1, gpu=2)
    reader.temperature(clock.now + 1, gpu=4, celsius=71)
    await passes(agent, clock, 1)
    registry = CollectorRegistry()
    registry.register(agent.collector)
    labels = {"node": "gpu-0", "model": "NVIDIA H100 80GB HBM3"}

    def value(name: str, gpu: int, **extra: str) -> float | None:
        uuid = agent.inventory.gpus[gpu].uuid
        return registry.get_sample_value(name, {**labels, "gpu": str(gpu), "uuid": uuid, **extra})

    assert value("queuectl_gpu_last_xid", 1) == 79
    assert value("queuectl_gpu_healthy", 1) == 0 and value("queuectl_gpu_healthy", 0) == 1
    assert value("queuectl_gpu_ecc_errors_total", 2, type="double") == 1
    assert value("queuectl_gpu_ecc_errors_total", 2, type="single") == 0
    assert value("queuectl_gpu_temperature_celsius", 4) == 71
    assert value("queuectl_gpu_power_watts", 0) == 120
    assert value("queuectl_gpu_memory_free_bytes", 0) == 81559 * 1024 * 1024


@pytest.mark.parametrize("unavailable", [None, "no driver"])
async def test_health_endpoints_never_fail_liveness(unavailable: str | None) -> None:
    from aiohttp.test_utils import TestClient, TestServer

    from queuectl.agent.server import make_app

    agent, _, _ = make_agent(None, unavailable=unavailable)
    await agent.start()
    async with TestClient(TestServer(make_app(lambda: agent.status))) as client:
        health = await client.get("/healthz")
        ready = await client.get("/readyz")
        scrape = await client.get("/metrics")
        assert health.status == 200
        assert (await health.json())["status"] == agent.status
        assert ready.status == (200 if unavailable is None else 503)
        assert "queuectl_agent_nvml_available" in await scrape.text()


class MissingNode(MemoryNode):
    async def get(self, name: str) -> NodeView:
        raise LookupError(f"nodes {name!r} not found")


async def test_a_node_that_cannot_be_read_does_not_stop_the_agent() -> None:
    node = MissingNode()
    agent, _, _ = make_agent(node)
    agent.config = AgentConfig(node_name="gpu-0", policy=POLICY, poll_s=0.02, call_timeout_s=5)
    stop = asyncio.Event()
    task = asyncio.create_task(agent.run(stop))
    await asyncio.sleep(0.2)
    assert not task.done() and agent.status == STATUS_OK
    stop.set()
    await asyncio.wait_for(task, 5)
    assert node.patches == []
