"""The device plugin against a fake kubelet: in-process gRPC on unix sockets in a short tmp dir.

The fake kubelet is what the real one does at the API: it serves `Registration` on
`kubelet.sock`, dials the plugin's endpoint back, reads `ListAndWatch`, and calls `Allocate` and
`GetPreferredAllocation`. The devices come from the agent's own passes (scripted node, manual
clock), so "an XID withdraws the GPU" is the agent's health decision end to end.
"""

from __future__ import annotations

import asyncio
import shutil
import tempfile
from collections.abc import AsyncIterator, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import grpc
import pytest

from queuectl import metrics
from queuectl.agent.deviceplugin.devices import plugin_devices
from queuectl.agent.deviceplugin.paths import PluginSocketError
from queuectl.agent.deviceplugin.plugin import DevicePluginServer, DeviceTable
from queuectl.agent.deviceplugin.v1beta1 import api_pb2 as pb
from queuectl.agent.deviceplugin.v1beta1 import api_pb2_grpc as pb_grpc
from queuectl.agent.discovery import Inventory, read_inventory
from queuectl.agent.health import HealthPolicy
from queuectl.agent.scripted import ManualClock, ScriptedReader
from queuectl.agent.shell import Agent, AgentConfig

POLICY = HealthPolicy(recovery_passes=2, hold_down_s=30)


class FakeKubelet(pb_grpc.RegistrationServicer):
    """Records registrations; `dial()` opens the plugin's endpoint as the kubelet would."""

    def __init__(self, socket_dir: Path) -> None:
        self.dir = socket_dir
        self.requests: list[pb.RegisterRequest] = []
        self.registered = asyncio.Event()
        self.server: grpc.aio.Server | None = None

    async def Register(self, request: pb.RegisterRequest, context: Any) -> pb.Empty:
        self.requests.append(request)
        self.registered.set()
        return pb.Empty()

    async def start(self) -> None:
        """Like a kubelet start: clear the directory, then serve a fresh kubelet.sock."""
        for entry in self.dir.iterdir():
            entry.unlink()
        self.registered = asyncio.Event()
        self.server = grpc.aio.server()
        pb_grpc.add_RegistrationServicer_to_server(self, self.server)
        self.server.add_insecure_port(f"unix://{self.dir / 'kubelet.sock'}")
        await self.server.start()

    async def stop(self) -> None:
        assert self.server is not None
        await self.server.stop(grace=0)

    def dial(self) -> tuple[grpc.aio.Channel, Any]:
        endpoint = self.dir / self.requests[-1].endpoint
        channel = grpc.aio.insecure_channel(f"unix://{endpoint}")
        return channel, pb_grpc.DevicePluginStub(channel)


@pytest.fixture
def socket_dir() -> Iterator[Path]:
    """Short on purpose: a unix socket path has at most 107 bytes, and pytest's tmp_path
    under xdist can be longer than that."""
    path = Path(tempfile.mkdtemp(prefix="dp", dir="/tmp"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


class Node:
    """A scripted 8 x H100 node whose agent feeds a device table, and a plugin serving it."""

    def __init__(self, socket_dir: Path) -> None:
        self.clock = ManualClock()
        self.reader = ScriptedReader.node("H100", 8, "nvswitch", clock=self.clock, seed="dp")
        self.table = DeviceTable()
        self.agent = Agent(
            self.reader,
            AgentConfig(node_name="gpu-0", policy=POLICY, poll_s=0, call_timeout_s=5),
            clock=self.clock,
            collector=metrics.GpuCollector(),
            on_state=lambda inv, state: self.table.update(plugin_devices(inv, state)),
        )
        self.plugin = DevicePluginServer(self.table, socket_dir, check_s=0.05)
        self.stop = asyncio.Event()

    async def passes(self, n: int, every: float = 10) -> None:
        for _ in range(n):
            self.clock.advance(every)
            await self.agent.run_pass(wait_s=0)

    def reader_inventory(self) -> Inventory:
        return read_inventory(self.reader)

    def uuids(self) -> list[str]:
        return [g.uuid for g in self.agent.inventory.gpus]


@pytest.fixture
async def kubelet(socket_dir: Path) -> AsyncIterator[FakeKubelet]:
    fake = FakeKubelet(socket_dir)
    await fake.start()
    yield fake
    await fake.stop()


@pytest.fixture
async def node(socket_dir: Path, kubelet: FakeKubelet) -> AsyncIterator[Node]:
    n = Node(socket_dir)
    assert await n.agent.start() is None
    task = asyncio.create_task(n.plugin.run(n.stop))
    await asyncio.wait_for(kubelet.registered.wait(), 10)
    yield n
    n.stop.set()
    await task


def health(response: pb.ListAndWatchResponse) -> dict[str, str]:
    return {d.ID: d.health for d in response.devices}


async def test_the_plugin_registers_for_nvidia_gpu_and_advertises_every_gpu_by_uuid(
    node: Node, kubelet: FakeKubelet
) -> None:
    (request,) = kubelet.requests
    assert (request.version, request.endpoint, request.resource_name) == (
        "v1beta1",
        "queuectl-gpu.sock",
        "nvidia.com/gpu",
    )
    assert request.options.get_preferred_allocation_available
    channel, stub = kubelet.dial()
    async with channel:
        options = await stub.GetDevicePluginOptions(pb.Empty())
        assert (options.pre_start_required, options.get_preferred_allocation_available) == (
            False,
            True,
        )
        stream = stub.ListAndWatch(pb.Empty())
        first = await stream.read()
        stream.cancel()
    assert health(first) == dict.fromkeys(node.uuids(), "Healthy")
    assert len(first.devices) == 8


async def test_an_xid_79_withdraws_that_gpu_and_the_hold_down_gives_it_back(
    node: Node, kubelet: FakeKubelet
) -> None:
    channel, stub = kubelet.dial()
    async with channel:
        stream = stub.ListAndWatch(pb.Empty())
        assert set(health(await stream.read()).values()) == {"Healthy"}
        await node.passes(2)  # nothing changes: nothing is sent (the next read is the XID's)

        node.reader.xid(node.clock.now + 1, gpu=3, xid=79)
        await node.passes(1)
        after_xid = health(await asyncio.wait_for(stream.read(), 10))
        gpu3 = node.uuids()[3]
        assert after_xid[gpu3] == "Unhealthy"
        assert [u for u, h in after_xid.items() if h == "Unhealthy"] == [gpu3]

        await node.passes(3)  # 2 clean passes and 30 s since the fault
        recovered = health(await asyncio.wait_for(stream.read(), 10))
        stream.cancel()
    assert set(recovered.values()) == {"Healthy"}


async def test_allocate_hands_the_container_the_uuids_in_nvidia_visible_devices(
    node: Node, kubelet: FakeKubelet
) -> None:
    two = node.uuids()[4:6]
    channel, stub = kubelet.dial()
    async with channel:
        answer = await stub.Allocate(
            pb.AllocateRequest(
                container_requests=[
                    pb.ContainerAllocateRequest(devices_ids=two),
                    pb.ContainerAllocateRequest(devices_ids=node.uuids()[:1]),
                ]
            )
        )
        assert [dict(c.envs) for c in answer.container_responses] == [
            {"NVIDIA_VISIBLE_DEVICES": ",".join(two)},
            {"NVIDIA_VISIBLE_DEVICES": node.uuids()[0]},
        ]
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await stub.Allocate(
                pb.AllocateRequest(
                    container_requests=[pb.ContainerAllocateRequest(devices_ids=["GPU-nope"])]
                )
            )
        assert (await stub.PreStartContainer(pb.PreStartContainerRequest())) == (
            pb.PreStartContainerResponse()
        )
    assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "unknown device IDs GPU-nope" in str(refused.value.details())


async def test_preferred_allocation_keeps_what_the_kubelet_must_include_then_packs_low_indexes(
    node: Node, kubelet: FakeKubelet
) -> None:
    u = node.uuids()
    channel, stub = kubelet.dial()
    async with channel:
        answer = await stub.GetPreferredAllocation(
            pb.PreferredAllocationRequest(
                container_requests=[
                    pb.ContainerPreferredAllocationRequest(
                        available_deviceIDs=[u[7], u[5], u[2], u[6]],
                        must_include_deviceIDs=[u[6]],
                        allocation_size=3,
                    )
                ]
            )
        )
    assert list(answer.container_responses[0].deviceIDs) == [u[6], u[2], u[5]]


async def test_a_restarted_kubelet_gets_the_plugin_registered_again(
    node: Node, kubelet: FakeKubelet
) -> None:
    await kubelet.stop()
    await kubelet.start()  # clears the directory, our socket included, as the kubelet does
    await asyncio.wait_for(kubelet.registered.wait(), 10)
    assert len(kubelet.requests) == 2
    channel, stub = kubelet.dial()
    async with channel:
        stream = stub.ListAndWatch(pb.Empty())
        assert len((await stream.read()).devices) == 8
        stream.cancel()


async def test_a_gpu_that_stops_answering_is_withdrawn_and_one_nvml_lost_stays_listed_unhealthy(
    node: Node, kubelet: FakeKubelet
) -> None:
    node.reader.stop_answering(node.clock.now + 1, gpu=5)
    await node.passes(1)
    rows = {d.uuid: d.health for d in node.table.devices}
    assert rows[node.uuids()[5]] == "Unhealthy" and len(rows) == 8

    # Discovery no longer lists GPU 5, but the agent still holds it faulted: the kubelet must
    # keep seeing it Unhealthy (a pod may hold it), not lose it silently.
    fewer = replace(node.agent.inventory, gpus=node.agent.inventory.gpus[:5])
    rows = {d.uuid: d.health for d in plugin_devices(fewer, node.agent.state)}
    assert rows[node.uuids()[5]] == "Unhealthy" and len(rows) == 6


async def test_the_plugin_registers_only_once_the_agent_has_read_the_gpus(
    socket_dir: Path, kubelet: FakeKubelet
) -> None:
    """Registering first would have the kubelet set nvidia.com/gpu to 0 until the first pass."""
    table, stop = DeviceTable(), asyncio.Event()
    task = asyncio.create_task(DevicePluginServer(table, socket_dir, check_s=0.01).run(stop))
    await asyncio.sleep(0.3)
    assert kubelet.requests == []
    table.update(plugin_devices(Node(socket_dir).reader_inventory(), {}))
    await asyncio.wait_for(kubelet.registered.wait(), 10)
    stop.set()
    await task


def test_a_socket_path_the_kernel_cannot_bind_is_refused_with_what_to_shorten() -> None:
    with pytest.raises(PluginSocketError, match="at most 107: use a shorter --device-plugin-dir"):
        DevicePluginServer(DeviceTable(), Path("/tmp") / ("d" * 100))
