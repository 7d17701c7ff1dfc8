"""A client for the kubelet's PodResources API: v1 `List` over its unix socket.

The kubelet serves it at `/var/lib/kubelet/pod-resources/kubelet.sock` (under its root
directory: a kubelet with another `--root-dir`, such as the test environment's, serves it
there). One call per agent pass; each answer lists every pod's containers and the device
IDs the kubelet gave them, which for our device plugin are the GPUs' NVML UUIDs.
"""

from __future__ import annotations

from pathlib import Path
from typing import Final

import grpc

from queuectl.agent.gpuuse import ContainerDevices
from queuectl.agent.podresources.paths import DEFAULT_SOCKET
from queuectl.agent.podresources.v1 import podresources_v1_pb2 as pb
from queuectl.agent.podresources.v1 import podresources_v1_pb2_grpc as pb_grpc

MAX_MESSAGE_BYTES: Final = 16 * 1024 * 1024  # the kubelet's own client allows as much


class PodResourcesUnavailable(RuntimeError):
    """The kubelet's socket is missing or did not answer; the message says which."""


async def list_devices(
    socket: Path = DEFAULT_SOCKET, timeout_s: float = 10.0
) -> list[ContainerDevices]:
    """Every container's devices, one entry per (container, resource)."""
    if not socket.exists():
        raise PodResourcesUnavailable(
            f"no kubelet PodResources socket at {socket}: is this a kubelet node (and is the "
            "directory mounted into the agent's pod)? Set --pod-resources-socket otherwise"
        )
    options = [("grpc.max_receive_message_length", MAX_MESSAGE_BYTES)]
    try:
        async with grpc.aio.insecure_channel(f"unix://{socket}", options=options) as channel:
            stub = pb_grpc.PodResourcesListerStub(channel)  # type: ignore[no-untyped-call]
            answer = await stub.List(pb.ListPodResourcesRequest(), timeout=timeout_s)
    except grpc.RpcError as exc:
        raise PodResourcesUnavailable(f"the kubelet's PodResources List failed: {exc}") from None
    return devices_of(answer)


def devices_of(answer: pb.ListPodResourcesResponse) -> list[ContainerDevices]:
    return [
        ContainerDevices(
            pod.namespace, pod.name, container.name, dev.resource_name, tuple(dev.device_ids)
        )
        for pod in answer.pod_resources
        for container in pod.containers
        for dev in container.devices
    ]
