"""`queuectl describe clusterqueue|localqueue|cohort|workload|job|jobset|... NAME`: quota, line,
and why.

Everything is computed from one listing of the cluster fed to the scheduling core (see
`_snapshot`): the quota table from the core's quota tree, the pending order from the core's
queue, and a pending workload's explanation from `Scheduler.explain`, the same code that
decides admission.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import Any

from queuectl import convert
from queuectl.api import resource as rest
from queuectl.api.views import ObjectView, WorkloadView
from queuectl.cli import _sections as sec
from queuectl.cli import _visible
from queuectl.cli import _workloads as wlv
from queuectl.cli._common import add_connection_args, connect, guarded, kind_type, namespace
from queuectl.cli._explain import explain_lines
from queuectl.cli._jobkinds import JOB_ALIASES, by_name, workload_of_job
from queuectl.cli._kube import CliError
from queuectl.cli._render import Cell, Term, duration, quantity, table
from queuectl.cli._snapshot import Snapshot
from queuectl.cli._usage import gpu_time as gpu_time_of
from queuectl.cli.main import Subparsers
from queuectl.core import ETA_ASSUMES, GpuTimeBank, fleet, waits_for_completions

KINDS = ("clusterqueue", "localqueue", "cohort", "workload", *JOB_ALIASES)
__all__ = ["add_parser", "describe", "run", "workload_of_job"]


def add_parser(subparsers: Subparsers) -> None:
    p = subparsers.add_parser(
        "describe",
        help="quota, pending line and the reason a workload waits",
        description="Describe a ClusterQueue (cq), LocalQueue (lq), Cohort (co), Workload (wl), "
        "or a queued job (job, " + ", ".join(k for k in JOB_ALIASES if k != "job") + ") by the "
        "Workload queuectl made for it.",
    )
    p.add_argument(
        "kind",
        type=kind_type(KINDS, JOB_ALIASES),
        help="clusterqueue|localqueue|cohort|workload|" + "|".join(JOB_ALIASES),
    )
    p.add_argument("name")
    add_connection_args(p)
    p.set_defaults(func=run)


@guarded
def run(args: argparse.Namespace) -> int:
    api = connect(args)
    try:
        ns = namespace(args) if args.kind in ("localqueue", "workload", *JOB_ALIASES) else ""
        if args.kind in JOB_ALIASES:
            job_kind = by_name(args.kind)
            args.kind, args.name = "workload", workload_of_job(api, args.name, ns, job_kind)
        kind = {
            "clusterqueue": rest.CLUSTER_QUEUES,
            "localqueue": rest.LOCAL_QUEUES,
            "cohort": rest.COHORTS,
            "workload": rest.WORKLOADS,
        }[args.kind]
        if args.kind != "cohort":  # a cohort may exist only as a name that queues use
            api.get(kind, args.name, ns or None)  # clear "not found" / "denied" first
        try:
            snap = Snapshot.load(api)
        except CliError as err:
            if not (_visible.denied(err) and args.kind in ("localqueue", "workload")):
                raise
            print(f"queuectl: note: {_visible.FALLBACK_NOTE.format(ns=ns)}", file=sys.stderr)
            term = Term.detect(sys.stdout)
            if args.kind == "localqueue":
                print(_visible.describe_local_queue(api, args.name, ns, term))
            else:
                print(_visible.describe_workload(api, args.name, ns, term))
            return 0
    finally:
        api.close()
    snap.warn()
    term = Term.detect(sys.stdout)
    print(describe(snap, args.kind, args.name, ns, term))
    return 0


def describe(snap: Snapshot, kind: str, name: str, ns: str, term: Term) -> str:
    render: dict[str, Callable[[], str]] = {
        "clusterqueue": lambda: cluster_queue(snap, name, term),
        "localqueue": lambda: local_queue(snap, name, ns, term),
        "cohort": lambda: cohort(snap, name, term),
        "workload": lambda: workload(snap, name, ns, term),
    }
    return render[kind]()


# --- ClusterQueue -----------------------------------------------------------------------------
def _active(snap: Snapshot, name: str) -> tuple[str, str]:
    """(word, style) of the queue's state as the core sees it."""
    spec = snap.sched.cluster_queues().get(name)
    qs = snap.sched.cluster_queue_status(name)
    if spec is not None and spec.stop_policy != "None":
        return f"Stopped ({spec.stop_policy})", "yellow"
    if qs is None:
        return "Unknown", "red"
    if not qs.active:
        return f"Inactive: {qs.problem}", "red"
    return "Active", "green"


def _cohort_path(snap: Snapshot, cohort_name: str | None) -> str:
    chain: list[str] = []
    cur = cohort_name
    while cur and cur not in chain:
        chain.append(cur)
        spec = snap.sched.cohorts().get(cur)
        cur = spec.parent if spec is not None else None
    return " < ".join(chain) if chain else "-"


def cluster_queue(snap: Snapshot, name: str, term: Term) -> str:
    obj = snap.get(rest.CLUSTER_QUEUES, name)
    spec = snap.sched.cluster_queues().get(name)
    if obj is None or spec is None:
        raise CliError(f'ClusterQueue "{name}" not found')
    state, style = _active(snap, name)
    pre = spec.preemption
    workloads = sec.in_queue(snap, name)
    n_pending = sum(1 for w in workloads if wlv.status(w) == "pending")
    n_admitted = sum(1 for w in workloads if wlv.status(w) == "admitted")
    head = sec.fields(
        [
            ("Name", name),
            ("Cohort", _cohort_path(snap, spec.cohort)),
            ("Status", term.paint(state, style)),
            ("Queueing", spec.queueing_strategy),
            (
                "Preemption",
                f"withinClusterQueue={pre.within_cluster_queue} "
                f"reclaimWithinCohort={pre.reclaim_within_cohort} "
                f"borrowWithinCohort={pre.borrow_within_cohort.policy}",
            ),
            (
                "Fungibility",
                f"whenCanBorrow={spec.flavor_fungibility.when_can_borrow} "
                f"whenCanPreempt={spec.flavor_fungibility.when_can_preempt}",
            ),
            ("Workloads", f"{n_pending} pending, {n_admitted} admitted"),
            *(
                [("Admission checks", _check_states(snap, spec.admission_checks))]
                if spec.admission_checks
                else []
            ),
            *_bank(obj, spec.gpu_time_bank),
        ],
        term,
    )
    rows = fleet.quota_table(snap.sched, name) or ()
    return "\n".join(
        [
            head,
            "",
            sec.heading("Quota", term),
            sec.quota_table(rows, term),
            "",
            sec.heading("Pending (in the order the scheduler tries them)", term),
            sec.pending_table(snap, workloads, term),
            "",
            sec.heading("Admitted", term),
            sec.admitted_table(snap, workloads, term),
        ]
    )


def _check_states(snap: Snapshot, gates: tuple[str, ...]) -> str:
    known = snap.sched.admission_checks()
    return ", ".join(
        f"{n} ({'Active' if known[n].active else 'not Active'})"
        if n in known
        else f"{n} (not found)"
        for n in gates
    )


def _bank(obj: wlv.Obj, bank: GpuTimeBank | None) -> list[tuple[str, str]]:
    """The GPU time bank line: the balance the controller last wrote, and its rules."""
    if bank is None:
        return []
    written = ObjectView(obj).status.get("gpuTimeBank") or {}
    balance = float(written.get("balanceGPUHours", 0.0))
    half = f", half-life {bank.half_life_hours:g} h" if bank.half_life_hours else ""
    standing = "borrows first, reclaimed last" if balance > 0 else "no credit"
    at = written.get("lastUpdateTime")
    return [
        (
            "GPU time bank",
            f"{balance:.2f} of {bank.cap_gpu_hours:g} GPU-hours ({standing}); earns "
            f"{bank.accrual_rate:g}/h per idle nominal GPU{half}"
            + (f"; written {at}" if at else ""),
        )
    ]


# --- LocalQueue -------------------------------------------------------------------------------
def local_queue(snap: Snapshot, name: str, ns: str, term: Term) -> str:
    obj = snap.get(rest.LOCAL_QUEUES, name, ns)
    if obj is None:
        raise CliError(f'LocalQueue "{name}" not found in namespace {ns}')
    spec = ObjectView(obj).spec
    cq = str(spec.get("clusterQueue") or "")
    stop = str(spec.get("stopPolicy") or "None")
    known = cq in snap.sched.cluster_queues()
    cq_state, style = _active(snap, cq) if known else ("not found", "red")
    workloads = sec.in_queue(snap, cq, local=(ns, name))
    n_pending = sum(1 for w in workloads if wlv.status(w) == "pending")
    n_admitted = sum(1 for w in workloads if wlv.status(w) == "admitted")
    head = sec.fields(
        [
            ("Name", name),
            ("Namespace", ns),
            ("ClusterQueue", f"{cq} ({term.paint(cq_state, style)})"),
            (
                "Stop policy",
                term.paint(stop, "yellow") if stop != "None" else "None",
            ),
            ("Workloads", f"{n_pending} pending, {n_admitted} admitted"),
        ],
        term,
    )
    usage = sec.usage_rows(workloads)
    usage_text = (
        table(
            ["FLAVOR", "RESOURCE", "USED"],
            [[f, r, quantity(r, v)] for (f, r), v in sorted(usage.items())],
            term,
        )
        if usage
        else "  (nothing admitted)"
    )
    return "\n".join(
        [
            head,
            "",
            sec.heading("Usage", term),
            usage_text,
            "",
            sec.heading(f"Pending (POSITION: in ClusterQueue {cq}; IN QUEUE: in this queue)", term),
            sec.pending_table(snap, workloads, term, local_positions=True),
            "",
            sec.heading("Admitted", term),
            sec.admitted_table(snap, workloads, term),
        ]
    )


# --- Cohort -----------------------------------------------------------------------------------
def cohort(snap: Snapshot, name: str, term: Term) -> str:
    members = fleet.cohort_members(snap.sched, name)
    if members is None:
        raise CliError(f'Cohort "{name}" not found (no Cohort object and no queue names it)')
    spec = snap.sched.cohorts().get(name)
    sub_cohorts, queues = members
    head = sec.fields(
        [
            ("Name", name),
            ("Path", _cohort_path(snap, name)),
            ("Defined", "yes" if spec is not None else "no (implicit: named by its members)"),
            ("Fair weight", f"{spec.fair_weight:g}" if spec is not None else "1"),
            ("Cohorts", ", ".join(sub_cohorts) or "-"),
            ("ClusterQueues", ", ".join(queues) or "-"),
        ],
        term,
    )
    rows = fleet.quota_table(snap.sched, name, cohort=True) or ()
    member_rows: list[list[Cell]] = []
    for q in queues:
        qs = snap.sched.cluster_queue_status(q)
        state, style = _active(snap, q)
        borrowed = ", ".join(
            f"{quantity(r, v)} {r}@{f}" for (f, r), v in sorted((qs.borrowed if qs else {}).items())
        )
        member_rows.append(
            [
                q,
                (state, style),
                str(qs.pending if qs else 0),
                str(qs.admitted if qs else 0),
                borrowed or "-",
            ]
        )
    return "\n".join(
        [
            head,
            "",
            sec.heading(
                "Quota (own + lent by members; USED: members beyond their own share)", term
            ),
            sec.quota_table(rows, term),
            "",
            sec.heading("ClusterQueues", term),
            table(["QUEUE", "STATUS", "PENDING", "ADMITTED", "BORROWED"], member_rows, term)
            if member_rows
            else "  (none)",
        ]
    )


# --- Workload ---------------------------------------------------------------------------------
def workload(snap: Snapshot, name: str, ns: str, term: Term) -> str:
    obj = snap.get(rest.WORKLOADS, name, ns)
    if obj is None:
        raise CliError(f'Workload "{name}" not found in namespace {ns}')
    key = wlv.key(obj)
    cq = snap.cluster_queue_of(obj)
    st = wlv.status(obj)
    positions = snap.positions()
    pc = wlv.priority_class(obj)
    pairs = [
        ("Name", name),
        ("Namespace", ns),
        ("LocalQueue", wlv.queue(obj) or "-"),
        ("ClusterQueue", cq or "-"),
        (
            "Priority",
            f"{wlv.priority(obj)}" + (f" ({pc})" if pc else "")
            if ObjectView(obj).spec.get("priority") is not None or not pc
            else f"not resolved ({pc} did not exist when the job was queued)",
        ),
        ("State", term.paint(wlv.state(obj), "green" if st == "admitted" else "yellow")),
        ("Created", f"{duration(snap.now - (wlv.created(obj) or snap.now))} ago"),
    ]
    if st == "admitted" and not WorkloadView(obj).is_admitted:
        since = wlv.admitted_at(obj)
        waited = duration(snap.now - since) if since is not None else "-"
        pairs.append(("Reserved", f"{waited} ago; its admission checks decide (below)"))
    elif st == "admitted":
        pairs.append(("Runtime", duration(wlv.runtime(obj, snap.now))))
    if st == "pending":
        pos = positions.get(key)
        total = len(snap.order(cq)) if cq else 0
        pairs.append(
            ("Position", f"{pos} of {total} in ClusterQueue {cq}" if pos else "not in line")
        )
        pairs.append(("ETA", sec.eta_line(snap.etas([key]).get(key), snap.now)))
        pairs.append(("ETA assumes", ETA_ASSUMES.removeprefix("assuming ")))
    flavors = snap.objects.get(rest.RESOURCE_FLAVORS.plural, [])
    if (gpu_time := gpu_time_of(obj, flavors, snap.now)) is not None:
        pairs.append(("GPU time", gpu_time))
    if (gpu_use := wlv.gpu_use(obj, snap.now)) is not None:
        pairs.append(("GPU use", gpu_use))
    maxexec = ObjectView(obj).spec.get("maximumExecutionTimeSeconds")
    if maxexec:
        pairs.append(("Max runtime", duration(float(maxexec))))
    parts = [
        sec.fields(pairs, term),
        "",
        sec.heading("Pod sets", term),
        sec.podsets_table(obj, term),
    ]
    if st == "pending":
        expl = snap.explain(key) if snap.sched.workload(key) is not None else None
        parts += ["", sec.heading("Why pending (the scheduler's own reasoning, now)", term)]
        parts += explain_lines(expl, snap.withheld(key), term)
        said = wlv.condition_message(obj)
        if expl is not None and expl.preemption_possible and said and waits_for_completions(*said):
            parts.append(
                "Patience:    the controller waits for finishing work first (its last word "
                "below); it preempts only if that quota does not come back in time"
            )
    gates = ObjectView(obj).status.get("admissionChecks") or []
    if gates:
        parts += ["", sec.heading("Admission checks (quota reserved, then every one Ready)", term)]
        parts.append(_checks(gates, snap.now, term))
    cond = wlv.condition_message(obj)
    if cond is not None and st != "finished":
        parts += ["", sec.heading("Controller's last word (QuotaReserved)", term)]
        parts.append(f"{cond[0]}: {cond[1]}" if cond[1] else cond[0])
    return "\n".join(parts)


def _checks(gates: list[dict[str, Any]], now: float, term: Term) -> str:
    style = {"Ready": "green", "Retry": "yellow", "Rejected": "red"}
    rows = []
    for c in gates:
        state = str(c.get("state") or "Pending")
        since = convert.parse_time(c.get("lastTransitionTime"))
        rows.append(
            [
                str(c.get("name") or ""),
                term.paint(state, style.get(state, "yellow")),
                f"{duration(now - since)} ago" if since is not None else "-",
                str(c.get("message") or "") or "-",
            ]
        )
    return table(["CHECK", "STATE", "SINCE", "MESSAGE"], rows, term)
