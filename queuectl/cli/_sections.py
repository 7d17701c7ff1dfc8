"""Building blocks of `describe`: field blocks, the quota table, workload lists.

Each returns text for one section, computed from a `Snapshot` only, so the unit tests feed
in-memory objects and read the same text a user sees.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from queuectl import convert
from queuectl.cli import _workloads as wlv
from queuectl.cli._explain import one_line
from queuectl.cli._render import Cell, Term, duration, quantity, table
from queuectl.cli._snapshot import Snapshot
from queuectl.core import ETA_ASSUMES, Eta
from queuectl.core.fleet import QuotaRow

Obj = wlv.Obj


def fields(pairs: Iterable[tuple[str, str]], term: Term) -> str:
    """`Label:  value` lines with the values aligned."""
    items = list(pairs)
    width = max((len(k) for k, _ in items), default=0) + 2
    return "\n".join(f"{term.paint((k + ':').ljust(width), 'bold')}{v}" for k, v in items)


def heading(title: str, term: Term) -> str:
    return term.paint(title, "bold", "cyan")


def quota_table(rows: Sequence[QuotaRow], term: Term) -> str:
    if not rows:
        return "  (no quota)"
    cells: list[list[Cell]] = []
    for r in rows:

        def q(v: int | None, res: str = r.resource) -> str:
            return quantity(res, v)

        over = r.borrowed > 0
        cells.append(
            [
                r.flavor,
                r.resource,
                q(r.nominal),
                q(r.borrowing_limit) if r.borrowing_limit is not None else "unlimited",
                q(r.lending_limit) if r.lending_limit is not None else "all",
                q(r.used),
                (q(r.borrowed), "yellow") if over else q(r.borrowed),
                q(r.lent),
            ]
        )
    headers = [
        "FLAVOR",
        "RESOURCE",
        "NOMINAL",
        "BORROWING LIMIT",
        "LENDING LIMIT",
        "USED",
        "BORROWED",
        "LENT",
    ]
    return table(headers, cells, term)


def in_queue(snap: Snapshot, cluster_queue: str, local: tuple[str, str] | None = None) -> list[Obj]:
    """Unfinished workloads resolved to a ClusterQueue (optionally one LocalQueue's only)."""
    out: list[Obj] = []
    for wl in snap.objects.get("workloads", ()):
        if wlv.status(wl) == "finished":
            continue
        if local is not None and (wlv.namespace(wl), wlv.queue(wl)) != local:
            continue
        if local is None and snap.cluster_queue_of(wl) != cluster_queue:
            continue
        out.append(wl)
    return out


LIMIT = 50
"""Rows per table in `describe`; `queuectl list workloads` shows them all."""


def _more(shown: int, total: int) -> str:
    if total <= shown:
        return ""
    return f"\n  ... and {total - shown} more (see `queuectl list workloads --cluster-queue ...`)"


def eta_cell(eta: Eta | None, now: float) -> str:
    """`in 1h20m`, `now`, or `unknown` (the reason is in `describe workload`)."""
    if eta is None or eta.start is None:
        return "unknown"
    wait = eta.start - now
    return "now" if wait < 1 else f"in {duration(wait)}"


def eta_line(eta: Eta | None, now: float) -> str:
    """The ETA with its clock time or its reason: what `describe workload` shows."""
    if eta is None:
        return "unknown: the scheduler does not hold it in line (see why below)"
    if eta.start is None:
        return f"unknown: {eta.why}"
    at = convert.format_time(eta.start)
    return f"{eta_cell(eta, now)} (about {at})"


ETA_NOTE = f"  ETA: {ETA_ASSUMES}"


def pending_table(
    snap: Snapshot, workloads: Sequence[Obj], term: Term, *, local_positions: bool = False
) -> str:
    """Pending workloads: first those in line, in the core's order, then the others."""
    pending = [w for w in workloads if wlv.status(w) == "pending"]
    if not pending:
        return "  (none)"
    positions = snap.positions()
    in_line = sorted(
        (w for w in pending if wlv.key(w) in positions), key=lambda w: positions[wlv.key(w)]
    )
    rest = sorted((w for w in pending if wlv.key(w) not in positions), key=wlv.key)
    headers = ["POSITION", "WORKLOAD", "LOCALQUEUE", "PRIORITY", "GPUS", "WAITING", "ETA", "WHY"]
    if local_positions:
        headers.insert(1, "IN QUEUE")
    rows: list[list[Cell]] = []
    ordered = [*in_line, *rest]
    etas = snap.etas(wlv.key(w) for w in ordered[:LIMIT])
    for i, w in enumerate(ordered[:LIMIT], 1):
        k = wlv.key(w)
        pos = str(positions[k]) if k in positions else "-"
        expl = snap.explain(k) if snap.sched.workload(k) is not None else None
        row: list[Cell] = [
            pos,
            k,
            wlv.queue(w),
            str(wlv.priority(w)),
            str(wlv.gpus(w)),
            duration(snap.now - (wlv.created(w) or snap.now)),
            eta_cell(etas.get(k), snap.now),
            one_line(expl, snap.withheld(k)),
        ]
        if local_positions:
            row.insert(1, str(i) if k in positions else "-")
        rows.append(row)
    return table(headers, rows, term) + _more(len(rows), len(ordered)) + "\n" + ETA_NOTE


def admitted_table(snap: Snapshot, workloads: Sequence[Obj], term: Term) -> str:
    admitted = [w for w in workloads if wlv.status(w) == "admitted"]
    if not admitted:
        return "  (none)"
    admitted.sort(key=lambda w: (-(wlv.runtime(w, snap.now) or 0), wlv.key(w)))
    rows: list[list[Cell]] = [
        [
            wlv.key(w),
            wlv.queue(w),
            str(wlv.priority(w)),
            wlv.flavors(w),
            str(wlv.gpus(w)),
            duration(wlv.runtime(w, snap.now)),
            (wlv.state(w), "green" if wlv.state(w) == "Admitted" else "yellow"),
        ]
        for w in admitted[:LIMIT]
    ]
    headers = ["WORKLOAD", "LOCALQUEUE", "PRIORITY", "FLAVORS", "GPUS", "RUNTIME", "STATE"]
    return table(headers, rows, term) + _more(len(rows), len(admitted))


def usage_rows(workloads: Iterable[Obj]) -> dict[tuple[str, str], int]:
    """(flavor, resource) -> total held by the admitted workloads among `workloads`."""
    out: dict[tuple[str, str], int] = {}
    for w in workloads:
        if wlv.status(w) != "admitted":
            continue
        for ps in convert.admission_from_status(w["status"]["admission"]).podsets:
            for res, total in ps.usage.items():
                fr = (ps.flavors.get(res, "-"), res)
                out[fr] = out.get(fr, 0) + total
    return out


def podsets_table(obj: wlv.Obj, term: Term) -> str:
    """A Workload's pod sets: what each pod asks, its topology, and where it was placed."""
    rows = []
    for ps in wlv.podsets(obj):
        per_pod = ", ".join(f"{r}={quantity(r, v)}" for r, v in sorted(ps.requests.items()))
        flavors = ",".join(sorted(set(ps.flavors.values()))) or "-"
        rows.append(
            [
                ps.name,
                str(ps.count),
                per_pod or "-",
                ps.topology or "-",
                flavors,
                ps.placement or "-",
            ]
        )
    return table(["NAME", "COUNT", "PER POD", "TOPOLOGY", "FLAVOR", "PLACEMENT"], rows, term)
