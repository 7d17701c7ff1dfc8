"""Cost of the ETA in `queuectl describe`: thousands of Workloads, no cluster.

A fleet of `--nodes` 8-GPU nodes; `--teams` ClusterQueues in one cohort share it (nominal quota
split evenly, reclaim Any); every GPU is held by running 8-GPU jobs (half with a time limit,
the others' runtimes learned from `--finished` finished Workloads); `--pending` Workloads of
1-8 GPUs wait, spread over the teams and three priorities. The objects are what the API server
would list; the timings are of what `describe` runs after listing: the snapshot (the
controller's feed), then `describe workload` of the last in its queue's line and `describe
clusterqueue` of that queue (50 ETAs, one replay), each from a fresh snapshot, and the ETAs of
every pending Workload at once (what `list workloads -A` asks). Wall and CPU seconds of this
process (CPU: less disturbed by a busy machine). Prints one JSON object. Not a timed test.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from datetime import UTC, datetime
from typing import Any

GPU = "nvidia.com/gpu"
NOW = 1_800_000_000.0


def _ts(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _workload(ns: str, name: str, gpus: int, priority: int, created: float) -> dict[str, Any]:
    return {
        "metadata": {"namespace": ns, "name": name, "creationTimestamp": _ts(created)},
        "spec": {
            "queueName": "default",
            "priority": priority,
            "podSets": [
                {
                    "name": "main",
                    "count": 1,
                    "template": {
                        "spec": {
                            "containers": [{"name": "c", "resources": {"limits": {GPU: gpus}}}]
                        }
                    },
                }
            ],
        },
    }


def _admit(wl: dict[str, Any], cq: str, gpus: int, since: float) -> None:
    cond = {"status": "True", "reason": "Admitted", "message": "", "lastTransitionTime": _ts(since)}
    wl["status"] = {
        "admission": {
            "clusterQueue": cq,
            "podSetAssignments": [
                {"name": "main", "count": 1, "flavors": {GPU: "h100"}, "resourceUsage": {GPU: gpus}}
            ],
        },
        "conditions": [{"type": "QuotaReserved", **cond}, {"type": "Admitted", **cond}],
    }


def objects(nodes: int, teams: int, pending: int, finished: int, seed: int) -> dict[str, Any]:
    rng = random.Random(seed)
    names = [f"team-{i}" for i in range(teams)]
    product = {"nvidia.com/gpu.product": "H100"}
    objs: dict[str, list[dict[str, Any]]] = {
        "namespaces": [
            {"metadata": {"name": n, "labels": {"kubernetes.io/metadata.name": n}}} for n in names
        ],
        "resourceflavors": [{"metadata": {"name": "h100"}, "spec": {"nodeLabels": product}}],
        "cohorts": [{"metadata": {"name": "org"}, "spec": {}}],
        "clusterqueues": [],
        "localqueues": [],
        "nodes": [],
        "workloads": [],
    }
    quota = nodes * 8 // teams
    for n in names:
        objs["clusterqueues"].append(
            {
                "metadata": {"name": n},
                "spec": {
                    "cohortName": "org",
                    "namespaceSelector": {},
                    "preemption": {"reclaimWithinCohort": "Any"},
                    "resourceGroups": [
                        {
                            "coveredResources": [GPU],
                            "flavors": [
                                {
                                    "name": "h100",
                                    "resources": [{"name": GPU, "nominalQuota": quota}],
                                }
                            ],
                        }
                    ],
                },
            }
        )
        objs["localqueues"].append(
            {"metadata": {"namespace": n, "name": "default"}, "spec": {"clusterQueue": n}}
        )
    for i in range(nodes):
        objs["nodes"].append(
            {
                "metadata": {"name": f"n{i:04d}", "labels": product},
                "spec": {},
                "status": {
                    "allocatable": {GPU: "8", "cpu": "128", "memory": "2Ti", "pods": "110"},
                    "conditions": [{"type": "Ready", "status": "True"}],
                },
            }
        )
    for i in range(nodes):  # one 8-GPU job per node, each team's own quota full
        team = names[i % teams]
        wl = _workload(team, f"run-{i:05d}", 8, 100, NOW - 7200)
        _admit(wl, team, 8, NOW - rng.uniform(0, 3 * 3600))
        if i % 2:
            wl["spec"]["maximumExecutionTimeSeconds"] = 4 * 3600
        objs["workloads"].append(wl)
    for i in range(finished):
        team = names[i % teams]
        ran = rng.lognormvariate(7.5, 1.2)
        end = NOW - rng.uniform(0, 86400)
        wl = _workload(team, f"done-{i:05d}", 8, 100, end - ran - 60)
        _admit(wl, team, 8, end - ran)
        wl["status"]["conditions"].append(
            {
                "type": "Finished",
                "status": "True",
                "reason": "Succeeded",
                "message": "",
                "lastTransitionTime": _ts(end),
            }
        )
        objs["workloads"].append(wl)
    for i in range(pending):
        team = names[i % teams]
        gpus = rng.choice((1, 2, 4, 8))
        prio = rng.choice((10, 100, 1000))
        objs["workloads"].append(
            _workload(team, f"wait-{i:05d}", gpus, prio, NOW - rng.uniform(0, 6 * 3600))
        )
    return objs


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="python -m bench eta", description=__doc__)
    p.add_argument("--nodes", type=int, default=128, help="8-GPU nodes")
    p.add_argument("--teams", type=int, default=8)
    p.add_argument("--pending", type=int, default=4000)
    p.add_argument("--finished", type=int, default=2000)
    p.add_argument("--seed", type=int, default=1)
    args = p.parse_args(argv)
    from queuectl.cli import describe
    from queuectl.cli._render import Term
    from queuectl.cli._snapshot import Snapshot

    objs = objects(args.nodes, args.teams, args.pending, args.finished, args.seed)
    plain = Term(color=False, width=0)
    out: dict[str, Any] = {"args": vars(args), "workloads": len(objs["workloads"])}

    t0, c0 = time.perf_counter(), time.process_time()
    snap = Snapshot.from_objects(objs, now=NOW)
    out["snapshot_seconds"] = round(time.perf_counter() - t0, 3)
    out["snapshot_cpu_seconds"] = round(time.process_time() - c0, 3)
    line = snap.order("team-0")
    last = line[-1]
    t0, c0 = time.perf_counter(), time.process_time()
    text = describe.describe(snap, "workload", last.split("/")[1], "team-0", plain)
    out["describe_workload_seconds"] = round(time.perf_counter() - t0, 3)
    out["describe_workload_cpu_seconds"] = round(time.process_time() - c0, 3)
    out["describe_workload_eta"] = next(x for x in text.splitlines() if x.startswith("ETA:"))
    out["position"] = f"{len(line)} of {len(line)}"
    snap = Snapshot.from_objects(objs, now=NOW)
    t0, c0 = time.perf_counter(), time.process_time()
    text = describe.describe(snap, "clusterqueue", "team-0", "", plain)
    out["describe_clusterqueue_seconds"] = round(time.perf_counter() - t0, 3)
    out["describe_clusterqueue_cpu_seconds"] = round(time.process_time() - c0, 3)
    snap = Snapshot.from_objects(objs, now=NOW)
    t0, c0 = time.perf_counter(), time.process_time()
    etas = snap.etas(key for q in sorted(snap.sched.cluster_queues()) for key in snap.order(q))
    out["eta_all_pending_seconds"] = round(time.perf_counter() - t0, 3)
    out["eta_all_pending_cpu_seconds"] = round(time.process_time() - c0, 3)
    out["eta_all_pending_unknown"] = sum(1 for e in etas.values() if e.start is None)
    out["clusterqueue_unknown_etas"] = sum(" unknown " in x for x in text.splitlines())
    print(json.dumps(out, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
