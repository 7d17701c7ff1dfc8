"""`queuectl list workloads` and `describe` for someone who may not list cluster-wide: a
namespace user.

Without the ClusterQueues and every namespace's Workloads no core can be fed, so the line and
the reasons come from the controller instead, through the visibility API (which the API server
authorizes per LocalQueue: docs/design/visibility.md). The Workloads themselves are listed in
the namespace, which `queuectl-batch-user` allows.
"""

from __future__ import annotations

import time
from typing import Any, Protocol

from queuectl import convert
from queuectl.api import names
from queuectl.api import resource as rest
from queuectl.api.resource import Resource
from queuectl.api.views import ObjectView
from queuectl.cli import _sections as sec
from queuectl.cli import _workloads as wlv
from queuectl.cli._kube import ApiFailure, CliError, Obj
from queuectl.cli._render import Term, duration, table

API = f"/apis/{names.VISIBILITY_GROUP}/{names.VISIBILITY_VERSION}"
Record = dict[str, Any]
FALLBACK_NOTE = (
    "cannot list cluster-wide (access denied): showing namespace {ns}, with positions and "
    "reasons from the controller's visibility API"
)


class Api(Protocol):
    def list(
        self, kind: Resource, namespace: str | None = None, label_selector: str | None = None
    ) -> list[Obj]: ...

    def request(self, method: str, path: str) -> Obj: ...


def denied(err: CliError) -> bool:
    """The listing failed because the caller may not list something (403)."""
    cause = err.__cause__
    return isinstance(cause, ApiFailure) and cause.status == 403


def pending_path(namespace: str, local_queue: str) -> str:
    return f"{API}/namespaces/{namespace}/localqueues/{local_queue}/pendingworkloads"


def namespace_workloads(
    api: Api, ns: str, queue: str | None, status: str | None, now: float | None = None
) -> tuple[list[Record], list[str]]:
    """The namespace's workload rows (as `listing.workloads` makes them) and the notes to print."""
    at = time.time() if now is None else now
    notes = [FALLBACK_NOTE.format(ns=ns)]
    line: dict[str, tuple[int, str]] = {}
    cluster_queue: dict[str, str] = {}
    for lq in api.list(rest.LOCAL_QUEUES, ns):
        view = ObjectView(lq)
        cluster_queue[view.name] = str(view.spec.get("clusterQueue") or "")
        try:
            summary = api.request("GET", pending_path(ns, view.name))
        except ApiFailure as err:
            notes.append(f"no line for LocalQueue {view.name}: {err.status} {err.message}")
            continue
        for item in summary.get("items") or ():
            why = str(item.get("message") or item.get("reason") or "")
            line[item["metadata"]["name"]] = (int(item["positionInClusterQueue"]) + 1, why)
    out = []
    for wl in api.list(rest.WORKLOADS, ns):
        if queue is not None and wlv.queue(wl) != queue:
            continue
        if status is not None and wlv.status(wl) != status:
            continue
        position, reason = line.get(wlv.name(wl), (None, ""))
        created = wlv.created(wl)
        runtime = wlv.runtime(wl, at)
        out.append(
            {
                "namespace": ns,
                "name": wlv.name(wl),
                "queue": wlv.queue(wl),
                "clusterQueue": cluster_queue.get(wlv.queue(wl), ""),
                "status": wlv.state(wl),
                "position": position,
                "priority": wlv.priority(wl),
                "gpus": wlv.gpus(wl),
                "ageSeconds": None if created is None else round(at - created),
                "flavors": wlv.flavors(wl),
                "runtimeSeconds": None if runtime is None else round(runtime),
                "reason": reason,
            }
        )
    out.sort(key=lambda r: (r["position"] is None, r["position"] or 0, r["name"]))
    return out, notes


def describe_local_queue(api: Api, name: str, ns: str, term: Term) -> str:
    """`describe localqueue` for a namespace user: the queue and its line, from the controller."""
    lq = next((o for o in api.list(rest.LOCAL_QUEUES, ns) if ObjectView(o).name == name), None)
    if lq is None:
        raise CliError(f'LocalQueue "{name}" not found in namespace {ns}')
    cq = str(ObjectView(lq).spec.get("clusterQueue") or "")
    try:
        items = api.request("GET", pending_path(ns, name)).get("items") or []
    except ApiFailure as err:
        raise CliError(
            f"cannot list cluster-wide (access denied), and the visibility API answered "
            f"{err.status}: {err.message}; ask for queuectl-batch-user in namespace {ns}"
        ) from err
    rows = [
        [
            str(int(i["positionInClusterQueue"]) + 1),
            str(int(i["positionInLocalQueue"]) + 1),
            str(i["metadata"]["name"]),
            str(i.get("priority", 0)),
            str(i.get("message") or i.get("reason") or "-"),
        ]
        for i in items
    ]
    pending = (
        table(["POSITION", "IN QUEUE", "NAME", "PRIORITY", "REASON"], rows, term)
        if rows
        else "  (none)"
    )
    return "\n".join(
        [
            sec.fields(
                [
                    ("Name", name),
                    ("Namespace", ns),
                    ("ClusterQueue", cq),
                    ("Pending", str(len(rows))),
                ],
                term,
            ),
            "",
            sec.heading(
                f"Pending (POSITION: in ClusterQueue {cq}; IN QUEUE: in this queue; "
                "from the controller's visibility API)",
                term,
            ),
            pending,
        ]
    )


def describe_workload(api: Api, name: str, ns: str, term: Term, now: float | None = None) -> str:
    """`describe workload` (or a job) for a namespace user: the Workload as it stands and, while
    it waits, its place in line, the scheduler's reason and its estimated start, from the
    controller (the user cannot feed a core of their own)."""
    at = time.time() if now is None else now
    wl = next((o for o in api.list(rest.WORKLOADS, ns) if wlv.name(o) == name), None)
    if wl is None:
        raise CliError(f'Workload "{name}" not found in namespace {ns}')
    queue = wlv.queue(wl)
    lq = next((o for o in api.list(rest.LOCAL_QUEUES, ns) if ObjectView(o).name == queue), None)
    cq = str(ObjectView(lq).spec.get("clusterQueue") or "") if lq is not None else ""
    st = wlv.status(wl)
    pairs = [
        ("Name", name),
        ("Namespace", ns),
        ("LocalQueue", queue or "-"),
        ("ClusterQueue", cq or "-"),
        ("Priority", str(wlv.priority(wl))),
        ("State", term.paint(wlv.state(wl), "green" if st == "admitted" else "yellow")),
        ("Created", f"{duration(at - (wlv.created(wl) or at))} ago"),
    ]
    if st == "admitted":
        pairs.append(("Runtime", duration(wlv.runtime(wl, at))))
    if st == "pending" and queue:
        pairs += _line_of(api, name, ns, queue, cq, at)
    if (use := wlv.gpu_use(wl, at)) is not None:
        pairs.append(("GPU use", use))
    return "\n".join(
        [
            sec.fields(pairs, term),
            "",
            sec.heading("Pod sets", term),
            sec.podsets_table(wl, term),
        ]
    )


def _line_of(
    api: Api, name: str, ns: str, queue: str, cq: str, now: float
) -> list[tuple[str, str]]:
    """Position, reason and ETA of a pending Workload, as the visibility API says them."""
    try:
        items = api.request("GET", pending_path(ns, queue)).get("items") or []
    except ApiFailure as err:
        return [("Position", f"unknown: the visibility API answered {err.status}: {err.message}")]
    mine = next((i for i in items if (i.get("metadata") or {}).get("name") == name), None)
    if mine is None:
        return [("Position", "not in line (the controller does not hold it in line now)")]
    in_cq = int(mine.get("positionInClusterQueue", 0)) + 1
    in_lq = int(mine.get("positionInLocalQueue", 0)) + 1
    start = convert.parse_time(mine.get("estimatedStartTime"))
    said = str(mine.get("estimatedStartMessage") or "")
    eta = (
        f"in {duration(max(start - now, 0))} (about {convert.format_time(start)}); {said}"
        if start is not None
        else (said or "unknown")
    )
    return [
        ("Position", f"{in_cq} in ClusterQueue {cq} ({in_lq} in LocalQueue {queue})"),
        ("Why", str(mine.get("message") or mine.get("reason") or "-")),
        ("ETA", eta),
        ("Source", "the controller's visibility API"),
    ]
