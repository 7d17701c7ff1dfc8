"""The device plugin's gRPC side: serve v1beta1 on a unix socket, register with the kubelet.

The kubelet listens on `<dir>/kubelet.sock`; a plugin serves on its own socket in the same
directory and calls `Registration.Register` with that socket's file name. The kubelet then dials
the plugin, reads `ListAndWatch` for the device list and calls `Allocate` for each container.
A restarting kubelet deletes every socket in the directory and creates a new `kubelet.sock`, so
`run` checks both every few seconds and serves and registers again when either changed (what
NVIDIA's plugin does with inotify).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import grpc

from queuectl.agent.deviceplugin import devices
from queuectl.agent.deviceplugin.devices import PluginDevice, UnknownDevices
from queuectl.agent.deviceplugin.paths import (
    DEFAULT_DIR,
    ENDPOINT,
    KUBELET_SOCKET,
    check_socket_path,
)
from queuectl.agent.deviceplugin.v1beta1 import api_pb2 as pb
from queuectl.agent.deviceplugin.v1beta1 import api_pb2_grpc as pb_grpc
from queuectl.api import names

log = logging.getLogger(__name__)

API_VERSION = "v1beta1"


class DeviceTable:
    """The devices to advertise, and a signal for each change (ListAndWatch streams follow it).
    `filled` is set by the first update: until the agent has read the GPUs there is nothing to
    say, and registering with an empty list would make the kubelet advertise 0 GPUs."""

    def __init__(self) -> None:
        self.devices: tuple[PluginDevice, ...] = ()
        self.filled = asyncio.Event()
        self._changed = asyncio.Event()

    def update(self, rows: tuple[PluginDevice, ...]) -> None:
        self.filled.set()
        if rows == self.devices:
            return
        self.devices = rows
        changed, self._changed = self._changed, asyncio.Event()
        changed.set()

    async def watch(self) -> AsyncIterator[tuple[PluginDevice, ...]]:
        """The current devices now, then the devices after every change, forever."""
        while True:
            waiter = self._changed
            yield self.devices
            await waiter.wait()


def _response(rows: tuple[PluginDevice, ...]) -> pb.ListAndWatchResponse:
    return pb.ListAndWatchResponse(devices=[pb.Device(ID=d.uuid, health=d.health) for d in rows])


class DevicePluginService(pb_grpc.DevicePluginServicer):
    """The five v1beta1 calls over a `DeviceTable`."""

    OPTIONS = pb.DevicePluginOptions(
        pre_start_required=False, get_preferred_allocation_available=True
    )

    def __init__(self, table: DeviceTable) -> None:
        self.table = table

    async def GetDevicePluginOptions(self, request: pb.Empty, context: Any) -> Any:
        return self.OPTIONS

    async def ListAndWatch(
        self, request: pb.Empty, context: Any
    ) -> AsyncIterator[pb.ListAndWatchResponse]:
        async for rows in self.table.watch():
            log.info(
                "advertising %d GPU(s), %d unhealthy",
                len(rows),
                sum(d.health != devices.HEALTHY for d in rows),
            )
            yield _response(rows)

    async def GetPreferredAllocation(
        self, request: pb.PreferredAllocationRequest, context: Any
    ) -> pb.PreferredAllocationResponse:
        known = self.table.devices
        return pb.PreferredAllocationResponse(
            container_responses=[
                pb.ContainerPreferredAllocationResponse(
                    deviceIDs=devices.preferred(
                        list(r.available_deviceIDs),
                        list(r.must_include_deviceIDs),
                        r.allocation_size,
                        known,
                    )
                )
                for r in request.container_requests
            ]
        )

    async def Allocate(self, request: pb.AllocateRequest, context: Any) -> pb.AllocateResponse:
        answers = []
        for r in request.container_requests:
            try:
                env = devices.allocation_env(list(r.devices_ids), self.table.devices)
            except UnknownDevices as exc:
                await context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(exc))
            log.info("allocating %s", env[devices.VISIBLE_DEVICES_ENV])
            answers.append(pb.ContainerAllocateResponse(envs=env))
        return pb.AllocateResponse(container_responses=answers)

    async def PreStartContainer(
        self, request: pb.PreStartContainerRequest, context: Any
    ) -> pb.PreStartContainerResponse:
        return pb.PreStartContainerResponse()


class DevicePluginServer:
    """Serves `DevicePluginService` on `<socket_dir>/<endpoint>` and registers it with the
    kubelet at `<socket_dir>/kubelet.sock` for `resource`."""

    def __init__(
        self,
        table: DeviceTable,
        socket_dir: Path = DEFAULT_DIR,
        *,
        endpoint: str = ENDPOINT,
        resource: str = names.RESOURCE_GPU,
        check_s: float = 2.0,
    ) -> None:
        self.table = table
        self.socket = check_socket_path(socket_dir / endpoint)  # PluginSocketError if too long
        self.kubelet_socket = check_socket_path(socket_dir / KUBELET_SOCKET)
        self.resource = resource
        self.check_s = check_s
        self.registered_with: int | None = None  # inode of the kubelet.sock we registered with
        self._server: grpc.aio.Server | None = None

    async def serve(self) -> None:
        """(Re)start the gRPC server on a fresh socket file."""
        await self.close()
        self.socket.unlink(missing_ok=True)
        server = grpc.aio.server()
        service = DevicePluginService(self.table)
        pb_grpc.add_DevicePluginServicer_to_server(service, server)  # type: ignore[no-untyped-call]
        server.add_insecure_port(f"unix://{self.socket}")
        await server.start()
        self._server = server

    async def register(self) -> None:
        """Tell the kubelet our socket and resource (it dials back at once)."""
        inode = os.stat(self.kubelet_socket).st_ino
        async with grpc.aio.insecure_channel(f"unix://{self.kubelet_socket}") as channel:
            stub = pb_grpc.RegistrationStub(channel)  # type: ignore[no-untyped-call]
            await stub.Register(
                pb.RegisterRequest(
                    version=API_VERSION,
                    endpoint=self.socket.name,
                    resource_name=self.resource,
                    options=DevicePluginService.OPTIONS,
                ),
                timeout=10,
            )
        self.registered_with = inode
        log.info("registered %s with the kubelet at %s", self.resource, self.kubelet_socket)

    def _kubelet_inode(self) -> int | None:
        try:
            return os.stat(self.kubelet_socket).st_ino
        except FileNotFoundError:
            return None

    def needs_registering(self) -> bool:
        """No server, our socket deleted (a kubelet start clears the directory), or a new
        kubelet.sock since we registered."""
        current = self._kubelet_inode()
        return current is not None and (
            self._server is None or not self.socket.exists() or current != self.registered_with
        )

    async def run(self, stop: asyncio.Event) -> None:
        """Once the table is filled, serve and register; again whenever the kubelet restarts;
        until `stop` is set. (Without NVML the table is never filled: nothing is advertised.)"""
        stopping = asyncio.create_task(stop.wait())
        filled = asyncio.create_task(self.table.filled.wait())
        await asyncio.wait({stopping, filled}, return_when=asyncio.FIRST_COMPLETED)
        stopping.cancel()
        filled.cancel()
        try:
            while not stop.is_set():
                if self.needs_registering():
                    try:
                        await self.serve()
                        await self.register()
                    except (grpc.RpcError, OSError, RuntimeError) as exc:
                        self.registered_with = None
                        log.warning("device plugin registration failed (%s); retrying", exc)
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), self.check_s)
        finally:
            await self.close()

    async def close(self) -> None:
        if self._server is not None:
            await self._server.stop(grace=1.0)
            self._server = None
            self.socket.unlink(missing_ok=True)
