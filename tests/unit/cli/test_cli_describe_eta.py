"""`describe` shows an estimated start for pending work, with what it assumes.

The scenario (cli_objects.research_tree): llm runs a 16-GPU job (8 borrowed from vision) that
started 5 minutes ago; vision runs 8 of its 16. llm's next 16-GPU gang waits for that job.
"""

from __future__ import annotations

import cli_objects as o

from queuectl.api import names
from queuectl.cli import describe, listing
from queuectl.cli._render import Term
from queuectl.cli._snapshot import Snapshot

PLAIN = Term(color=False, width=0)


def snapshot(*extra: o.Obj, limit: float | None = None) -> Snapshot:
    objs = o.research_tree()
    if limit is not None:
        for wl in objs["workloads"]:
            wl["spec"]["maximumExecutionTimeSeconds"] = int(limit)
    objs["workloads"] += [o.workload("team-llm", "gang", "training", 8, count=2), *extra]
    return Snapshot.from_objects(objs, now=o.NOW)


def finished(name: str, ran: float, ended: float = o.NOW - 1000) -> o.Obj:
    wl = o.workload("team-llm", name, "training", 8, admitted_to="llm", admitted_at=ended - ran)
    wl["status"]["conditions"].append(
        {
            "type": names.COND_FINISHED,
            "status": "True",
            "reason": "Succeeded",
            "message": "",
            "lastTransitionTime": o.ts(ended),
        }
    )
    return wl


def test_a_gang_behind_a_job_with_a_time_limit_expects_to_start_when_it_ends() -> None:
    snap = snapshot(limit=3600)
    text = describe.describe(snap, "workload", "gang", "team-llm", PLAIN)
    assert "ETA:          in 55m (about " in text
    assert "ETA assumes:  running jobs end at their time limits or typical runtimes" in text
    cq = describe.describe(snap, "clusterqueue", "llm", "", PLAIN)
    assert (
        "ETA"
        in cq.splitlines()[
            cq.splitlines().index("Pending (in the order the scheduler tries them)") + 1
        ]
    )
    assert "in 55m" in cq
    assert "ETA: assuming running jobs end at their time limits" in cq


def test_without_limits_or_history_the_eta_is_unknown_and_says_why() -> None:
    text = describe.describe(snapshot(), "workload", "gang", "team-llm", PLAIN)
    assert "ETA:          unknown: no runtime history" in text


def test_finished_workloads_teach_the_typical_runtime() -> None:
    """One finished llm job ran an hour: the running one (5 minutes in) has 55 left."""
    snap = snapshot(finished("done", 3600))
    assert snap.runtimes().remaining("llm", 0, 300) == 3300
    text = describe.describe(snap, "workload", "gang", "team-llm", PLAIN)
    assert "ETA:          in 55m (about " in text


def test_list_workloads_gives_the_eta_in_wide_and_json_output() -> None:
    snap = snapshot(limit=3600)
    records = listing.collect(snap, "workload", "team-llm")
    by_name = {r["name"]: r for r in records}
    assert by_name["gang"]["etaSeconds"] == 3300
    assert by_name["l-run"]["etaSeconds"] is None  # running: no ETA
    wide = listing.render("workload", records, "wide", PLAIN, False)
    assert wide.splitlines()[0].split()[-2:] == ["ETA", "REASON"]
    assert "in 55m" in wide
