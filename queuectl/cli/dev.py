"""`queuectl dev up|down|status|kubeconfig`: a local cluster with fake GPU nodes in one command.

The environment lives in a state dir (~/.local/state/queuectl/dev/<name> by default) that
holds its PKI, etcd data, kubeconfig, one log per process and the record of the processes it
started; `down` stops exactly those. `up` on a running environment only says so.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import time
from collections.abc import Callable
from pathlib import Path

from queuectl.api import gpushare
from queuectl.cli._devgpus import scenario_path, start_gpu_agent
from queuectl.cli._numbers import whole
from queuectl.cli.main import Subparsers
from queuectl.testenv import (
    ControlPlane,
    TestEnvError,
    ensure_binaries,
    operatorbuild,
    operatorrun,
    operators,
    realnode,
)
from queuectl.testenv.certmanager import ensure_cert_manager, start_cert_manager
from queuectl.testenv.nodeconfig import REAL_NODE_LABEL
from queuectl.testenv.nodes import H100

# Processes `dev up` starts after the control plane and the fake nodes. The controller (and
# its webhooks) will be added here as one call each, e.g.
#   plane.start_process("queuectl-controller",
#                       [sys.executable, "-m", "queuectl.cli.main", "controller",
#                        "--kubeconfig", plane.kubeconfig], ready=http_probe(".../readyz"))
# `dev down` stops them with the rest; their logs go to <state dir>/logs/<name>.log.
EXTRA_PROCESSES: list[Callable[[ControlPlane], object]] = []

_KEEP_ON_RESTART = frozenset({"logs"})


def _scenario(text: str) -> Path:
    try:
        return scenario_path(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def state_dir(name: str) -> Path:
    explicit = os.environ.get("QUEUECTL_STATE_DIR")
    if explicit:
        return Path(explicit) / name
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "queuectl" / "dev" / name


def _err(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def _usage(plane: ControlPlane) -> str:
    return "\n".join(
        [
            f"  export KUBECONFIG={plane.kubeconfig}",
            "  kubectl get nodes -L nvidia.com/gpu.product,nvidia.com/gpu.count",
            f"  export QUEUECTL_KUBECONFIG={plane.kubeconfig}   # tests reuse this cluster",
            f"  queuectl dev down{_name_flag(plane.name)}   # stops every process it started",
        ]
    )


def _name_flag(name: str) -> str:
    return "" if name == "default" else f" --name {name}"


def _wipe(directory: Path) -> None:
    """Remove what a previous run left, except logs (a fresh start gets fresh PKI and etcd)."""
    if not directory.exists():
        return
    for entry in directory.iterdir():
        if entry.name in _KEEP_ON_RESTART:
            continue
        if entry.is_dir():
            shutil.rmtree(entry)
        else:
            entry.unlink()


def up(args: argparse.Namespace) -> int:
    directory = state_dir(args.name)
    existing = ControlPlane.attach(directory)
    if existing.is_running():
        print(f'queuectl dev environment "{args.name}" is already up ({existing.server}).')
        print(_usage(existing))
        return 0
    if existing.supervisor.records:
        _err(f"Cleaning up a partly stopped environment in {directory}")
        existing.stop()
    if args.emulated_gpus is not None and args.real_nodes != 1:
        _err(
            "queuectl dev up: --emulated-gpus needs --real-nodes 1 (the kubelet's device plugin "
            "directory is fixed at /var/lib/kubelet/device-plugins: one real kubelet per host)"
        )
        return 2
    _wipe(directory)
    plane = ControlPlane(
        directory,
        name=args.name,
        apiserver_port=args.apiserver_port,
        progress=_err,
        real_nodes=args.real_nodes,
    )
    try:
        plane.start()
        if args.nodes:
            _err(f"Adding {args.nodes} fake GPU nodes ({args.gpus_per_node} x {args.product})")
            plane.add_gpu_nodes(
                args.nodes,
                args.gpus_per_node,
                args.product,
                args.gpu_memory_mib,
                blocks=args.blocks,
                racks_per_block=args.racks_per_block,
                name_prefix=args.node_prefix,
            )
        for count, mig_layout in args.mig_nodes:
            _err(f"Adding {count} fake MIG nodes ({args.gpus_per_node} x {mig_layout})")
            plane.add_gpu_nodes(
                count,
                args.gpus_per_node,
                args.product,
                args.gpu_memory_mib,
                name_prefix=f"mig-{mig_layout.removeprefix('all-').replace('+', '-')}",
                mig_layout=mig_layout,
            )
        for count, replicas in args.shared_nodes:
            _err(f"Adding {count} fake time-sliced nodes ({args.gpus_per_node} GPUs x {replicas})")
            plane.add_gpu_nodes(
                count,
                args.gpus_per_node,
                args.product,
                args.gpu_memory_mib,
                name_prefix=f"shared-x{replicas}",
                replicas=replicas,
            )
        if args.cert_manager:
            _err("Starting cert-manager (controller, cainjector) and installing its CRDs")
            start_cert_manager(plane, ensure_cert_manager(_err))
        for operator in args.operators:
            _err(f"Starting the {operator} operator")
            operatorrun.start(plane, operator, _err)
        for start in EXTRA_PROCESSES:
            start(plane)
        if args.emulated_gpus is not None:
            (node,) = realnode.recorded(directory)
            _err(f"Starting the agent's device plugin on {node.name} ({args.emulated_gpus.name})")
            start_gpu_agent(
                plane,
                node.name,
                args.emulated_gpus,
                pod_resources_socket=node.pod_resources_socket,
            )
        for archive in args.load_image:
            for node in realnode.recorded(directory):
                _err(f"Loading {archive} into {node.name}")
                realnode.load_image(node, Path(archive), args.image_base_name)
    except TestEnvError as exc:
        plane.stop()
        _err(f"queuectl dev up failed: {exc}")
        return 1
    except BaseException:
        plane.stop()
        raise
    real = f", {args.real_nodes} real node(s)" if args.real_nodes else ""
    ops = f", operators: {', '.join(args.operators)}" if args.operators else ""
    print(
        f'queuectl dev environment "{args.name}" is up: {plane.server}, '
        f"{args.nodes} fake GPU nodes{real}{ops}, started in {plane.start_seconds or 0:.1f}s."
    )
    print(_usage(plane))
    return 0


def down(args: argparse.Namespace) -> int:
    plane = ControlPlane.attach(state_dir(args.name))
    stopped = plane.stop()
    if not stopped:
        print(f'queuectl dev environment "{args.name}" is not running.')
        return 0
    print(f'Stopped queuectl dev environment "{args.name}": {", ".join(stopped)}.')
    return 0


def _rss_mib(pid: int) -> float:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def status(args: argparse.Namespace) -> int:
    plane = ControlPlane.attach(state_dir(args.name))
    records = plane.supervisor.records
    if not records:
        print(f'queuectl dev environment "{args.name}" is not up (`queuectl dev up`).')
        return 3
    state = plane.state() or {}
    print(f'queuectl dev environment "{args.name}" in {plane.work_dir}')
    if state:
        started = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(float(state["started_at"])))  # type: ignore[arg-type]
        print(f"  server      {state['server']}  (up since {started})")
        print(f"  kubeconfig  {plane.kubeconfig}")
    total = 0.0
    for record in records:
        alive = record.alive()
        rss = _rss_mib(record.pid) if alive else 0.0
        total += rss
        word = "running" if alive else "STOPPED"
        print(f"  {record.name:<24} {word:<8} pid {record.pid:<8} {rss:7.0f} MiB")
    print(f"  {'total':<24} {'':<8} {'':<12} {total:7.0f} MiB")
    if plane.is_running():
        return 0
    print(f"Some processes stopped; see {plane.work_dir / 'logs'}; `queuectl dev down` cleans up.")
    return 1


def kubeconfig(args: argparse.Namespace) -> int:
    plane = ControlPlane.attach(state_dir(args.name))
    if not plane.is_running():
        _err(f'queuectl dev environment "{args.name}" is not up (`queuectl dev up`).')
        return 1
    print(plane.kubeconfig)
    return 0


def build(args: argparse.Namespace) -> int:
    started = time.monotonic()
    try:
        binaries = ensure_binaries(_err)
        print(
            f"Control-plane binaries ready in {binaries.dir} ({time.monotonic() - started:.0f}s)."
        )
        for operator in args.operators:
            began = time.monotonic()
            binary = operatorbuild.build(operator, _err)
            print(f"{operator} operator ready: {binary} ({time.monotonic() - began:.0f}s).")
    except TestEnvError as exc:
        _err(f"queuectl dev build failed: {exc}")
        return 1
    return 0


def _operator_names(text: str) -> list[str]:
    try:
        return operators.parse_names(text)
    except operators.UnknownOperator as exc:
        raise argparse.ArgumentTypeError(
            f"{exc.problem}; known: {operators.known()}, or all"
        ) from None


_MIG_NODES = whole(1, 10_000, "a number of nodes from 1 to 10,000")
_REPLICAS = whole(1, 1_024, "time-slicing replicas from 1 to 1,024")


def mig_nodes(text: str) -> tuple[int, str]:
    """'2:all-1g.10gb' -> (2, 'all-1g.10gb'), the layout checked on an 80 GB GPU."""
    count, _, layout = text.partition(":")
    try:
        gpushare.parse_layout(layout, 80)
        return _MIG_NODES(count), layout
    except (ValueError, argparse.ArgumentTypeError) as exc:
        raise argparse.ArgumentTypeError(
            f"--mig-nodes {text!r}: {exc} (e.g. 2:all-1g.10gb)"
        ) from exc


def shared_nodes(text: str) -> tuple[int, int]:
    """'2x4' -> two nodes, each GPU time-sliced four ways."""
    count, _, replicas = text.partition("x")
    try:
        return _MIG_NODES(count), _REPLICAS(replicas)
    except argparse.ArgumentTypeError as exc:
        raise argparse.ArgumentTypeError(
            f"--shared-nodes {text!r} is not NxREPLICAS (e.g. 2x4): {exc}"
        ) from None


def add_parser(subparsers: Subparsers) -> None:
    dev = subparsers.add_parser(
        "dev", help="run a local Kubernetes control plane with fake GPU nodes"
    )

    def usage(_: argparse.Namespace) -> int:
        dev.print_help()
        return 2

    dev.set_defaults(func=usage)
    actions = dev.add_subparsers(dest="dev_command", metavar="ACTION")

    def named(
        name: str, func: Callable[[argparse.Namespace], int], help: str
    ) -> argparse.ArgumentParser:
        parser = actions.add_parser(name, help=help)
        parser.add_argument("--name", default="default", help="environment name (default: default)")
        parser.set_defaults(func=func)
        return parser

    p = named("up", up, "start the environment (builds the binaries the first time)")
    p.add_argument(
        "--nodes", type=whole(0, 10_000), default=4, help="fake GPU nodes to create (default 4)"
    )
    p.add_argument(
        "--gpus-per-node", type=whole(1, 1_024), default=8, help="GPUs per node (default 8)"
    )
    p.add_argument("--product", default=H100, help=f"nvidia.com/gpu.product (default {H100})")
    p.add_argument(
        "--gpu-memory-mib", type=whole(1, 2**24), default=81559, help="nvidia.com/gpu.memory"
    )
    p.add_argument(
        "--mig-nodes",
        type=mig_nodes,
        action="append",
        default=[],
        metavar="N:LAYOUT",
        help="also add N nodes whose GPUs are MIG-partitioned, mixed strategy "
        "(all-1g.10gb, all-balanced, 3g.40gb+2g.20gb+1g.10gb); repeatable",
    )
    p.add_argument(
        "--shared-nodes",
        type=shared_nodes,
        action="append",
        default=[],
        metavar="NxREPLICAS",
        help="also add N nodes whose GPUs are time-sliced REPLICAS ways; repeatable",
    )
    p.add_argument("--blocks", type=whole(1, 1_000), default=1, help="topology blocks (default 1)")
    p.add_argument(
        "--racks-per-block", type=whole(1, 1_000), default=1, help="racks per block (default 1)"
    )
    p.add_argument("--node-prefix", default="gpu", help="node name prefix (default gpu)")
    p.add_argument(
        "--apiserver-port",
        type=whole(1, 65_535, "a port from 1 to 65535"),
        default=None,
        help="default: a free port",
    )
    p.add_argument(
        "--real-nodes",
        type=whole(0, 100),
        default=0,
        help="real nodes (kubelet + containerd, root only) beside the fake ones; pods pick them "
        f"with nodeSelector {REAL_NODE_LABEL}=true (default 0)",
    )
    p.add_argument(
        "--emulated-gpus",
        type=_scenario,
        default=None,
        metavar="DESCRIPTION",
        help="give the real node GPUs: the agent's device plugin over the NVML emulator, "
        "nvidia.com/gpu allocated by the real kubelet; a node description file or hgx-h100, "
        "a100-mig (needs --real-nodes 1)",
    )
    p.add_argument(
        "--load-image",
        action="append",
        default=[],
        metavar="ARCHIVE",
        help="an OCI/Docker image archive to load into every real node (repeatable; no "
        "registry: use imagePullPolicy: Never or IfNotPresent)",
    )
    p.add_argument(
        "--cert-manager",
        action="store_true",
        help="run real cert-manager (controller and CA injector, built once from its Go module) "
        "against the cluster, with its CRDs, for the cert-manager overlay",
    )
    p.add_argument(
        "--image-base-name",
        default=None,
        metavar="NAME",
        help="name for archive refs that are bare tags, e.g. localhost/queuectl/queuectl "
        "for `make image`'s OCI layout (tagged 0.1.0)",
    )
    operators_help = (
        f"comma-separated operators to build, install the CRDs of and run: {operators.known()}, "
        "or all (built from Go modules on first use, a few minutes each)"
    )
    p.add_argument("--operators", type=_operator_names, default=[], help=operators_help)
    build_parser = actions.add_parser("build", help="build (or find cached) binaries only")
    build_parser.add_argument(
        "--operators", type=_operator_names, default=[], help="also build these operators"
    )
    build_parser.set_defaults(func=build)
    named("down", down, "stop every process the environment started")
    named("status", status, "show the environment's processes and memory")
    named("kubeconfig", kubeconfig, "print the path of the admin kubeconfig")
