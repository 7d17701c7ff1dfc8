"""`queuectl stop|resume clusterqueue|localqueue|workload NAME`.

A queue is stopped through its `spec.stopPolicy`: `Hold` admits nothing new and lets admitted
work run; `--drain` (`HoldAndDrain`) also evicts what is admitted. A workload is stopped by
`spec.active=false`, which takes it out of line and evicts it if it runs. `resume` sets
`stopPolicy: None` or `active: true`. Each is one merge patch; the controller does the rest.
"""

from __future__ import annotations

import argparse

from queuectl.api import resource as rest
from queuectl.api.resource import Resource
from queuectl.cli._common import add_connection_args, connect, guarded, kind_type, namespace
from queuectl.cli._kube import CliError, Obj
from queuectl.cli.main import Subparsers

KINDS = ("clusterqueue", "localqueue", "workload")
_KIND: dict[str, Resource] = {
    "clusterqueue": rest.CLUSTER_QUEUES,
    "localqueue": rest.LOCAL_QUEUES,
    "workload": rest.WORKLOADS,
}


def add_parser(subparsers: Subparsers) -> None:
    stop = subparsers.add_parser(
        "stop",
        help="stop a queue (Hold, or HoldAndDrain with --drain) or deactivate a workload",
        description="Stop admitting from a ClusterQueue or LocalQueue, or deactivate a Workload.",
    )
    stop.add_argument("kind", type=kind_type(KINDS), help="clusterqueue|localqueue|workload")
    stop.add_argument("name")
    stop.add_argument(
        "--drain",
        action="store_true",
        help="queues: also evict admitted workloads (stopPolicy HoldAndDrain)",
    )
    add_connection_args(stop)
    stop.set_defaults(func=run_stop)
    resume = subparsers.add_parser(
        "resume",
        help="resume a stopped queue or reactivate a workload",
        description="Set a queue's stopPolicy back to None, or a Workload's spec.active to true.",
    )
    resume.add_argument("kind", type=kind_type(KINDS), help="clusterqueue|localqueue|workload")
    resume.add_argument("name")
    add_connection_args(resume)
    resume.set_defaults(func=run_resume)


def patch_for(kind: str, stop: bool, drain: bool = False) -> Obj:
    """The merge patch that stops or resumes an object of `kind`."""
    if kind == "workload":
        if drain:
            raise CliError("--drain applies to queues; a stopped workload is always evicted")
        return {"spec": {"active": not stop}}
    policy = ("HoldAndDrain" if drain else "Hold") if stop else "None"
    return {"spec": {"stopPolicy": policy}}


def describe_change(kind: str, name: str, patch: Obj) -> str:
    spec = patch["spec"]
    if kind == "workload":
        if spec["active"]:
            return f"workload/{name} resumed (active: queued for admission again)"
        return f"workload/{name} stopped (inactive: out of line, evicted if it was running)"
    policy = spec["stopPolicy"]
    what = {
        "None": "resumed (stopPolicy None: admits again)",
        "Hold": "stopped (stopPolicy Hold: admits nothing new; admitted workloads keep running)",
        "HoldAndDrain": "stopped (stopPolicy HoldAndDrain: admits nothing; admitted workloads "
        "are evicted)",
    }[policy]
    return f"{kind}/{name} {what}"


def _apply(args: argparse.Namespace, stop: bool) -> int:
    body = patch_for(args.kind, stop, getattr(args, "drain", False))
    kind = _KIND[args.kind]
    api = connect(args)
    try:
        ns = namespace(args) if kind.namespaced else None
        api.merge_patch(kind, args.name, body, ns)
    finally:
        api.close()
    print(describe_change(args.kind, args.name, body))
    return 0


@guarded
def run_stop(args: argparse.Namespace) -> int:
    return _apply(args, stop=True)


@guarded
def run_resume(args: argparse.Namespace) -> int:
    return _apply(args, stop=False)
