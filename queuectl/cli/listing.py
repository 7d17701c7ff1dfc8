"""`queuectl list clusterqueues|localqueues|cohorts|workloads|flavors`: one row per object.

Counts, usage and positions come from the same core snapshot as `describe`: a pending
workload's POSITION is its place in its ClusterQueue's line as the core orders it. `-o json|yaml`
prints the rows as records (the columns of `-o wide`, with numbers as numbers), not the raw
objects (`kubectl get -o yaml` already gives those). A caller who may not list cluster-wide gets
`list workloads` for their namespace through the visibility API (`_visible`), with a note.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence
from typing import Any

from queuectl.api import names
from queuectl.api.views import ObjectView
from queuectl.cli import _visible
from queuectl.cli import _workloads as wlv
from queuectl.cli._common import add_connection_args, connect, guarded, kind_type, namespace
from queuectl.cli._explain import one_line
from queuectl.cli._kube import CliError
from queuectl.cli._render import Cell, Term, duration, table
from queuectl.cli._snapshot import Snapshot
from queuectl.cli.main import Subparsers
from queuectl.core import fleet

KINDS = ("clusterqueue", "localqueue", "cohort", "workload", "flavor")
GPU = names.GPU_RESOURCE
Record = dict[str, Any]


def add_parser(subparsers: Subparsers) -> None:
    p = subparsers.add_parser(
        "list",
        help="list queues, cohorts, workloads or flavors with positions and usage",
        description="List ClusterQueues (cq), LocalQueues (lq), Cohorts (co), Workloads (wl) "
        "or ResourceFlavors (rf).",
    )
    p.add_argument(
        "kind", type=kind_type(KINDS), help="clusterqueues|localqueues|cohorts|workloads|flavors"
    )
    add_connection_args(p)
    p.add_argument(
        "-A",
        "--all-namespaces",
        action="store_true",
        help="LocalQueues/Workloads of every namespace",
    )
    p.add_argument("--queue", help="only this LocalQueue's workloads")
    p.add_argument("--cluster-queue", help="only workloads and LocalQueues of this ClusterQueue")
    p.add_argument("--status", choices=wlv.STATUSES, help="only workloads in this state")
    p.add_argument("-o", "--output", choices=("wide", "json", "yaml"), help="output format")
    p.set_defaults(func=run)


@guarded
def run(args: argparse.Namespace) -> int:
    api = connect(args)
    try:
        ns = None if args.all_namespaces else namespace(args)
        try:
            snap = Snapshot.load(api)
        except CliError as err:
            # A namespace user: their namespace through the visibility API, and say so.
            if not (_visible.denied(err) and args.kind == "workload" and ns is not None):
                raise
            records, notes = _visible.namespace_workloads(api, ns, args.queue, args.status)
            for note in notes:
                print(f"queuectl: note: {note}", file=sys.stderr)
            print(render("workload", records, args.output, Term.detect(sys.stdout), False))
            return 0
    finally:
        api.close()
    snap.warn()
    records = collect(snap, args.kind, ns, args.queue, args.cluster_queue, args.status)
    print(render(args.kind, records, args.output, Term.detect(sys.stdout), ns is None))
    return 0


def collect(
    snap: Snapshot,
    kind: str,
    ns: str | None,
    queue: str | None = None,
    cluster_queue: str | None = None,
    status: str | None = None,
) -> list[Record]:
    """The rows, as records; `ns` None means every namespace."""
    if kind == "workload":
        return workloads(snap, ns, queue, cluster_queue, status)
    if kind == "localqueue":
        return local_queues(snap, ns, cluster_queue)
    if kind == "clusterqueue":
        return cluster_queues(snap)
    if kind == "cohort":
        return cohorts(snap)
    return flavors(snap)


# --- records ----------------------------------------------------------------------------------
def workloads(
    snap: Snapshot,
    ns: str | None,
    queue: str | None = None,
    cluster_queue: str | None = None,
    status: str | None = None,
) -> list[Record]:
    positions = snap.positions()
    out = []
    pending: list[str] = []
    for wl in snap.objects.get("workloads", ()):
        if ns is not None and wlv.namespace(wl) != ns:
            continue
        if queue is not None and wlv.queue(wl) != queue:
            continue
        cq = snap.cluster_queue_of(wl)
        if cluster_queue is not None and cq != cluster_queue:
            continue
        st = wlv.status(wl)
        if status is not None and st != status:
            continue
        key = wlv.key(wl)
        reason = ""
        if st == "pending":
            expl = snap.explain(key) if snap.sched.workload(key) is not None else None
            reason = one_line(expl, snap.withheld(key))
            pending.append(key)
        created = wlv.created(wl)
        out.append(
            {
                "namespace": wlv.namespace(wl),
                "name": wlv.name(wl),
                "queue": wlv.queue(wl),
                "clusterQueue": cq or "",
                "status": wlv.state(wl),
                "position": positions.get(key),
                "priority": wlv.priority(wl),
                "gpus": wlv.gpus(wl),
                "ageSeconds": None if created is None else round(snap.now - created),
                "flavors": wlv.flavors(wl),
                "runtimeSeconds": _round(wlv.runtime(wl, snap.now)),
                "reason": reason,
            }
        )
    etas = snap.etas(pending)  # one bounded replay for all of them
    for r in out:
        eta = etas.get(f"{r['namespace']}/{r['name']}")
        start = eta.start if eta is not None else None
        r["etaSeconds"] = None if start is None else round(max(0.0, start - snap.now))
    out.sort(
        key=lambda r: (
            r["clusterQueue"],
            r["position"] is None,
            r["position"] or 0,
            r["namespace"],
            r["name"],
        )
    )
    return out


def _round(v: float | None) -> int | None:
    return None if v is None else round(v)


def local_queues(snap: Snapshot, ns: str | None, cluster_queue: str | None) -> list[Record]:
    counts: dict[tuple[str, str], list[int]] = {}
    for wl in snap.objects.get("workloads", ()):
        st = wlv.status(wl)
        if st == "finished":
            continue
        c = counts.setdefault((wlv.namespace(wl), wlv.queue(wl)), [0, 0, 0])
        if st == "pending":
            c[0] += 1
        else:
            c[1] += 1
            c[2] += wlv.gpus(wl)
    out = []
    for lq in snap.objects.get("localqueues", ()):
        meta, spec = ObjectView(lq).meta, ObjectView(lq).spec
        lq_ns = str(meta.get("namespace") or "")
        cq = str(spec.get("clusterQueue") or "")
        if (ns is not None and lq_ns != ns) or (cluster_queue is not None and cq != cluster_queue):
            continue
        pending, admitted, gpus = counts.get((lq_ns, str(meta.get("name"))), [0, 0, 0])
        out.append(
            {
                "namespace": lq_ns,
                "name": meta.get("name"),
                "clusterQueue": cq,
                "stopPolicy": spec.get("stopPolicy") or "None",
                "pending": pending,
                "admitted": admitted,
                "gpusInUse": gpus,
            }
        )
    out.sort(key=lambda r: (r["namespace"], r["name"]))
    return out


def _gpu_sum(rows: Sequence[fleet.QuotaRow], attr: str) -> int:
    return sum(int(getattr(r, attr)) for r in rows if r.resource == GPU)


def cluster_queues(snap: Snapshot) -> list[Record]:
    out = []
    specs = snap.sched.cluster_queues()
    for name in sorted(specs):
        spec = specs[name]
        qs = snap.sched.cluster_queue_status(name)
        rows = fleet.quota_table(snap.sched, name) or ()
        if spec.stop_policy != "None":
            state = f"Stopped ({spec.stop_policy})"
        elif qs is None or not qs.active:
            state = "Inactive"
        else:
            state = "Active"
        out.append(
            {
                "name": name,
                "cohort": spec.cohort or "",
                "strategy": spec.queueing_strategy,
                "status": state,
                "pending": qs.pending if qs else 0,
                "admitted": qs.admitted if qs else 0,
                "gpusUsed": _gpu_sum(rows, "used"),
                "gpusNominal": _gpu_sum(rows, "nominal"),
                "gpusBorrowed": _gpu_sum(rows, "borrowed"),
                "gpusLent": _gpu_sum(rows, "lent"),
                "flavors": ",".join(dict.fromkeys(r.flavor for r in rows)),
            }
        )
    return out


def cohorts(snap: Snapshot) -> list[Record]:
    specs = snap.sched.cohorts()
    out = []
    for name in snap.sched.cohort_names():
        spec = specs.get(name)
        sub, queues = fleet.cohort_members(snap.sched, name) or ((), ())
        rows = fleet.quota_table(snap.sched, name, cohort=True) or ()
        out.append(
            {
                "name": name,
                "parent": (spec.parent if spec else None) or "",
                "cohorts": ",".join(sub),
                "clusterQueues": ",".join(queues),
                "gpusOwn": _gpu_sum(rows, "nominal"),
                "gpusBorrowed": _gpu_sum(rows, "borrowed"),
                "weight": spec.fair_weight if spec else 1.0,
            }
        )
    return out


def flavors(snap: Snapshot) -> list[Record]:
    specs, all_nodes = snap.sched.flavors(), snap.sched.nodes()
    alloc = {f.flavor: f for f in fleet.gpu_allocation(snap.sched)}
    out = []
    for name in sorted(specs):
        spec = specs[name]
        nodes = [
            n
            for n in all_nodes.values()
            if all(n.labels.get(k) == v for k, v in spec.node_labels.items())
        ]
        f = alloc.get(name)
        out.append(
            {
                "name": name,
                "nodeLabels": ",".join(f"{k}={v}" for k, v in sorted(spec.node_labels.items())),
                "topology": spec.topology_name or "",
                "nodes": len(nodes),
                "gpus": f.capacity if f else 0,
                "gpusAllocated": f.allocated if f else 0,
                "allocationRatio": round(f.ratio, 4) if f else 0.0,
                "unhealthyGpus": fleet.unhealthy_gpus(nodes),
            }
        )
    return out


# --- output -----------------------------------------------------------------------------------
Column = tuple[str, Callable[[Record], Cell], bool]
"""(header, cell of a record, wide only)"""


def _opt(v: Any) -> str:
    return "-" if v is None or v == "" else str(v)


def _status_cell(r: Record) -> Cell:
    s = str(r["status"])
    style = {"Admitted": "green", "Active": "green", "Pending": "yellow"}.get(s, "")
    if s.startswith(("Stopped", "Inactive", "Evicting")):
        style = "red"
    return (s, style) if style else s


def _eta_cell(r: Record) -> str:
    if r["status"] != "Pending":
        return "-"
    v = r.get("etaSeconds")
    return "unknown" if v is None else ("now" if v < 1 else f"in {duration(v)}")


COLUMNS: dict[str, list[Column]] = {
    "workload": [
        ("NAMESPACE", lambda r: r["namespace"], False),
        ("NAME", lambda r: r["name"], False),
        ("QUEUE", lambda r: _opt(r["queue"]), False),
        ("CLUSTERQUEUE", lambda r: _opt(r["clusterQueue"]), False),
        ("STATUS", _status_cell, False),
        ("POSITION", lambda r: _opt(r["position"]), False),
        ("PRIORITY", lambda r: str(r["priority"]), False),
        ("GPUS", lambda r: str(r["gpus"]), False),
        ("AGE", lambda r: duration(r["ageSeconds"]), False),
        ("FLAVORS", lambda r: _opt(r["flavors"]), True),
        ("RUNTIME", lambda r: duration(r["runtimeSeconds"]), True),
        ("ETA", _eta_cell, True),
        ("REASON", lambda r: _opt(r["reason"]), True),
    ],
    "localqueue": [
        ("NAMESPACE", lambda r: r["namespace"], False),
        ("NAME", lambda r: r["name"], False),
        ("CLUSTERQUEUE", lambda r: r["clusterQueue"], False),
        ("PENDING", lambda r: str(r["pending"]), False),
        ("ADMITTED", lambda r: str(r["admitted"]), False),
        ("STOP", lambda r: r["stopPolicy"], False),
        ("GPUS IN USE", lambda r: str(r["gpusInUse"]), True),
    ],
    "clusterqueue": [
        ("NAME", lambda r: r["name"], False),
        ("COHORT", lambda r: _opt(r["cohort"]), False),
        ("STRATEGY", lambda r: r["strategy"], False),
        ("STATUS", _status_cell, False),
        ("PENDING", lambda r: str(r["pending"]), False),
        ("ADMITTED", lambda r: str(r["admitted"]), False),
        ("GPUS USED/NOMINAL", lambda r: f"{r['gpusUsed']}/{r['gpusNominal']}", False),
        ("BORROWED", lambda r: str(r["gpusBorrowed"]), True),
        ("LENT", lambda r: str(r["gpusLent"]), True),
        ("FLAVORS", lambda r: _opt(r["flavors"]), True),
    ],
    "cohort": [
        ("NAME", lambda r: r["name"], False),
        ("PARENT", lambda r: _opt(r["parent"]), False),
        ("COHORTS", lambda r: _opt(r["cohorts"]), False),
        ("CLUSTERQUEUES", lambda r: _opt(r["clusterQueues"]), False),
        ("OWN GPUS", lambda r: str(r["gpusOwn"]), True),
        ("BORROWED", lambda r: str(r["gpusBorrowed"]), True),
        ("WEIGHT", lambda r: f"{r['weight']:g}", True),
    ],
    "flavor": [
        ("NAME", lambda r: r["name"], False),
        ("NODES", lambda r: str(r["nodes"]), False),
        ("GPUS", lambda r: str(r["gpus"]), False),
        ("ALLOCATED", lambda r: str(r["gpusAllocated"]), False),
        ("RATIO", lambda r: f"{r['allocationRatio']:.0%}", False),
        ("UNHEALTHY", lambda r: str(r["unhealthyGpus"]), False),
        ("TOPOLOGY", lambda r: _opt(r["topology"]), True),
        ("NODE LABELS", lambda r: _opt(r["nodeLabels"]), True),
    ],
}


def render(
    kind: str, records: list[Record], output: str | None, term: Term, all_namespaces: bool
) -> str:
    if output == "json":
        return json.dumps({"items": records}, indent=2)
    if output == "yaml":
        import yaml

        return yaml.safe_dump({"items": records}, sort_keys=False).rstrip()
    if not records:
        return f"No {kind}s found."
    cols = [c for c in COLUMNS[kind] if output == "wide" or not c[2]]
    if not all_namespaces:
        cols = [c for c in cols if c[0] != "NAMESPACE"]
    rows = [[cell(r) for _, cell, _ in cols] for r in records]
    return table([h for h, _, _ in cols], rows, term)


__all__ = ["collect", "render"]
