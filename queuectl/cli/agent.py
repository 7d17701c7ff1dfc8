"""`queuectl agent`: the GPU node agent (a DaemonSet), or with --once a one-shot check of a node.

`--once` runs one discovery and health pass and prints what it found and what it would write to
the Node; it writes only with `--write`. Without NVML it says so and exits 0.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import os
import signal
import socket
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path

import yaml
from kubernetes_asyncio import client as k8s
from kubernetes_asyncio import config as k8s_config

from queuectl.agent import report
from queuectl.agent.deviceplugin.devices import plugin_devices
from queuectl.agent.deviceplugin.paths import (
    DEFAULT_DIR,
    ENDPOINT,
    KUBELET_SOCKET,
    PluginSocketError,
    check_socket_path,
)
from queuectl.agent.health import APPLICATION_XIDS, HealthPolicy
from queuectl.agent.kube import KubeNodeClient
from queuectl.agent.nvml import NvmlReader
from queuectl.agent.podresources.paths import DEFAULT_SOCKET as DEFAULT_POD_RESOURCES_SOCKET
from queuectl.agent.reader import GpuReader
from queuectl.agent.scripted import ScriptedReader
from queuectl.agent.server import serve
from queuectl.agent.sharing import MIG_STRATEGIES, Sharing
from queuectl.agent.shell import Agent, AgentConfig
from queuectl.cli._numbers import PORT, real, seconds, whole
from queuectl.cli.main import Subparsers

log = logging.getLogger("queuectl.agent")


def add_parser(subparsers: Subparsers) -> None:
    p = subparsers.add_parser(
        "agent",
        help="GPU node agent: NVML discovery, topology, health",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "--node-name",
        default=os.environ.get("NODE_NAME") or socket.gethostname(),
        help="the Node to report on (default: $NODE_NAME, else the hostname)",
    )
    p.add_argument(
        "--kubeconfig",
        default=os.environ.get("KUBECONFIG"),
        help="kubeconfig file (default: $KUBECONFIG; in a pod: the service account)",
    )
    p.add_argument("--once", action="store_true", help="one pass, print it, exit")
    p.add_argument("--write", action="store_true", help="with --once: also patch the Node")
    p.add_argument("--json", action="store_true", help="with --once: print JSON")
    p.add_argument(
        "--metrics-port",
        type=PORT,
        default=8080,
        help="port for /metrics, /healthz, /readyz (0: do not serve)",
    )
    p.add_argument(
        "--poll-seconds", type=seconds(minimum=1.0), default=10.0, help="period of a pass"
    )
    p.add_argument(
        "--max-temperature",
        type=real(0.0, 200.0, above_low=True, says="degrees C, more than 0, at most 200"),
        default=90.0,
        help="GPU temperature (C) at or above which a GPU is unhealthy",
    )
    p.add_argument(
        "--recovery-passes",
        type=whole(1, 1_000),
        default=3,
        help="consecutive clean passes before an unhealthy GPU counts as healthy again",
    )
    p.add_argument(
        "--hold-down-seconds",
        type=seconds(zero="no hold-down"),
        default=300.0,
        help="minimum time since a GPU's last fault before it counts as healthy again",
    )
    p.add_argument(
        "--ignore-xids",
        type=xid_list,
        default=APPLICATION_XIDS,
        help="comma-separated XIDs that do not make a GPU unhealthy (default: 13,31,43,45,68,109)",
    )
    p.add_argument(
        "--no-gfd-labels",
        action="store_true",
        help="leave nvidia.com/gpu.* labels to GPU Feature Discovery",
    )
    p.add_argument(
        "--mig-strategy",
        choices=MIG_STRATEGIES,
        default="none",
        help="how the device plugin advertises MIG devices (as its MIG_STRATEGY): "
        "mixed: nvidia.com/mig-<profile>; single: nvidia.com/gpu; none: MIG not advertised",
    )
    p.add_argument(
        "--time-slicing-replicas",
        type=whole(1, 1_024),
        default=1,
        help="time-slicing replicas the device plugin makes of each GPU (1: not shared)",
    )
    p.add_argument(
        "--device-plugin",
        action="store_true",
        help="also serve the kubelet device plugin API for nvidia.com/gpu (whole GPUs by UUID, "
        "unhealthy GPUs withdrawn); not beside NVIDIA's device plugin",
    )
    p.add_argument(
        "--device-plugin-dir",
        type=Path,
        default=DEFAULT_DIR,
        help=f"the kubelet's device plugin socket directory (default: {DEFAULT_DIR})",
    )
    p.add_argument(
        "--pod-resources-socket",
        type=Path,
        default=DEFAULT_POD_RESOURCES_SOCKET,
        help="the kubelet's PodResources socket, to report which container holds which GPU "
        f"(default: {DEFAULT_POD_RESOURCES_SOCKET})",
    )
    p.add_argument(
        "--no-gpu-use",
        action="store_true",
        help="do not ask the kubelet which container holds which GPU (no per-pod GPU use)",
    )
    p.add_argument(
        "--gpu-use-report-seconds",
        type=seconds(minimum=1.0),
        default=60.0,
        help="one per-container GPU-use report on the Node per this many seconds (default 60)",
    )
    p.add_argument(
        "--scripted",
        type=Path,
        metavar="SCENARIO.yaml",
        help="read a scripted node instead of NVML (testenv, demos)",
    )
    p.set_defaults(func=run)


def xid_list(text: str) -> frozenset[int]:
    """'13,31,43' -> {13, 31, 43}; an empty string ignores nothing."""
    try:
        return frozenset(int(x) for x in text.split(",") if x.strip())
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"not a comma-separated list of XIDs: {text!r}") from exc


def config_from(args: argparse.Namespace) -> AgentConfig:
    ignored = frozenset(args.ignore_xids)
    policy = HealthPolicy(
        ignored_xids=ignored,
        max_temperature_c=args.max_temperature,
        recovery_passes=args.recovery_passes,
        hold_down_s=args.hold_down_seconds,
    )
    return AgentConfig(
        node_name=args.node_name,
        policy=policy,
        poll_s=args.poll_seconds,
        gfd_labels=not args.no_gfd_labels,
        sharing=Sharing(args.mig_strategy, args.time_slicing_replicas),
        use_report_s=args.gpu_use_report_seconds,
    )


def reader_from(args: argparse.Namespace) -> GpuReader:
    if args.scripted is not None:
        scenario = yaml.safe_load(args.scripted.read_text()) or {}
        return ScriptedReader.from_scenario(scenario, time.time)
    return NvmlReader()


@contextlib.asynccontextmanager
async def kube_client(kubeconfig: str | None) -> AsyncIterator[k8s.ApiClient]:
    configuration = k8s.Configuration()
    if kubeconfig is None and os.environ.get("KUBERNETES_SERVICE_HOST"):
        k8s_config.load_incluster_config(client_configuration=configuration)  # type: ignore[no-untyped-call]
    else:
        await k8s_config.load_kube_config(
            config_file=kubeconfig, client_configuration=configuration
        )
    async with k8s.ApiClient(configuration=configuration) as api:
        yield api


def wants_cluster(args: argparse.Namespace) -> bool:
    return bool(args.write or args.kubeconfig or os.environ.get("KUBERNETES_SERVICE_HOST"))


async def once(args: argparse.Namespace) -> int:
    """One pass: read the Node when a cluster is at hand, write only with --write."""
    config = config_from(args)
    mode = "write" if args.write else ("dry-run" if wants_cluster(args) else "no-cluster")
    async with contextlib.AsyncExitStack() as stack:
        node_client = None
        if mode != "no-cluster":
            node_client = KubeNodeClient(
                await stack.enter_async_context(kube_client(args.kubeconfig))
            )
        agent = Agent(reader_from(args), config, node_client, write=args.write)
        unavailable = await agent.start()
        if unavailable is not None:
            if args.write:
                await agent.report_unavailable()
            if args.json:
                print(
                    json.dumps(report.to_json(config.node_name, None, unavailable, mode), indent=2)
                )
            else:
                print(report.unavailable_text(config.node_name, unavailable))
            return 0
        try:
            result = await agent.run_pass(wait_s=1.0)
        finally:
            await agent.close()
    if args.json:
        print(
            json.dumps(report.to_json(config.node_name, result, None, mode), indent=2, default=str)
        )
    else:
        print(report.to_text(config.node_name, result, mode))
    return 0


async def daemon(args: argparse.Namespace) -> int:
    """The DaemonSet loop, serving /metrics and /healthz, until SIGTERM or SIGINT."""
    config = config_from(args)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    # gRPC (device plugin, PodResources) only in the daemon: `--once` starts without grpcio.
    from queuectl.agent.deviceplugin.plugin import DevicePluginServer, DeviceTable
    from queuectl.agent.podresources.client import list_devices

    table = DeviceTable()
    plugin = DevicePluginServer(table, args.device_plugin_dir) if args.device_plugin else None
    socket_path: Path = args.pod_resources_socket
    async with kube_client(args.kubeconfig) as api:
        agent = Agent(
            reader_from(args),
            config,
            KubeNodeClient(api),
            on_state=lambda inventory, state: table.update(plugin_devices(inventory, state)),
            devices=None if args.no_gpu_use else lambda: list_devices(socket_path),
        )
        runner = await serve(lambda: agent.status, args.metrics_port) if args.metrics_port else None
        try:
            if plugin is None:
                await agent.run(stop)
            else:
                await asyncio.gather(agent.run(stop), plugin.run(stop))
        finally:
            if runner is not None:
                await runner.cleanup()
    return 0


def run(args: argparse.Namespace) -> int:
    logging.basicConfig(
        level=logging.INFO,
        stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    if args.write and not args.once:
        print(
            "queuectl agent: --write only applies with --once (the daemon always writes)",
            file=sys.stderr,
        )
        return 2
    if args.device_plugin:
        problem = device_plugin_problem(args)
        if problem:
            print(f"queuectl agent: {problem}", file=sys.stderr)
            return 2
    return asyncio.run(once(args) if args.once else daemon(args))


def device_plugin_problem(args: argparse.Namespace) -> str | None:
    """Why --device-plugin cannot run with these flags, or None."""
    if args.once:
        return "--device-plugin serves the kubelet; it does not apply with --once"
    if args.mig_strategy != "none" or args.time_slicing_replicas != 1:
        return (
            "--device-plugin advertises whole GPUs only: leave --mig-strategy at none and "
            "--time-slicing-replicas at 1, or use NVIDIA's device plugin for MIG and sharing"
        )
    try:
        for name in (ENDPOINT, KUBELET_SOCKET):
            check_socket_path(args.device_plugin_dir / name)
    except PluginSocketError as exc:
        return str(exc)
    return None
