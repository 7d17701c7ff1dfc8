"""`describe` of a workload in a queue with admission checks: each check's state and message,
and the queue's checks with whether they exist and are Active."""

from __future__ import annotations

from typing import Any

import cli_objects as o

from queuectl.api import names
from queuectl.cli import describe
from queuectl.cli._render import Term
from queuectl.cli._snapshot import Snapshot

PLAIN = Term(color=False, width=0)


def gated_snapshot(state: str, message: str, *, active: bool = True) -> Snapshot:
    objs: dict[str, list[Any]] = o.research_tree()
    objs["clusterqueues"][0]["spec"]["admissionChecks"] = ["capacity", "quota-audit"]
    cond = {"type": "Active", "status": str(active), "reason": "Set", "message": ""}
    objs["admissionchecks"] = [
        {"metadata": {"name": "capacity"}, "spec": {"controllerName": "x"}, "status": {
            "conditions": [cond]
        }}
    ]  # fmt: skip
    wl = objs["workloads"][0]  # team-vision/v-run, quota reserved in vision
    adm = next(c for c in wl["status"]["conditions"] if c["type"] == names.COND_ADMITTED)
    adm.update(status="False", reason=names.REASON_WAITING_FOR_CHECKS)
    wl["status"]["admissionChecks"] = [
        {"name": "capacity", "state": state, "message": message,
         "lastTransitionTime": o.ts(o.NOW - 60)},
        {"name": "quota-audit", "state": "Pending", "message": "",
         "lastTransitionTime": o.ts(o.NOW - 300)},
    ]  # fmt: skip
    return Snapshot.from_objects(objs, now=o.NOW)


def test_workload_describe_shows_each_checks_state_and_message() -> None:
    snap = gated_snapshot("Rejected", "region has no H100 offering")
    text = describe.describe(snap, "workload", "v-run", "team-vision", PLAIN)
    assert "State:" in text and "Reserved" in text
    assert "Admission checks" in text
    rows = {line.split()[0]: line.split() for line in text.splitlines() if line.strip()}
    assert rows["capacity"][1:4] == ["Rejected", "1m", "ago"]
    assert "region has no H100 offering" in text
    assert rows["quota-audit"][1] == "Pending"


def test_cluster_queue_describe_names_its_checks_and_their_state() -> None:
    snap = gated_snapshot("Pending", "", active=False)
    text = describe.describe(snap, "clusterqueue", "vision", "", PLAIN)
    assert "capacity (not Active), quota-audit (not found)" in text
