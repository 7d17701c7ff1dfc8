"""Fair-sharing preemption on and off: `queuectl simulate` on a generated trace where one team
always borrows.

The fleet is `--nodes` nodes of 8 H100. The cohort `org` owns half the GPUs itself (a pool no
team owns: everything run on it is borrowed); `--teams` teams share the other half as equal
nominal quota, reclaim what is lent (Any) and preempt lower priority inside their queue. One
priority class with a grace period and a minimum runtime, so every job is of equal priority
and a victim keeps both. team-0 always borrows (`always-borrows`: many jobs of up to 8 GPUs that
run for hours); the others take the generator's habits in turn. The same trace runs twice, with
fair-sharing preemption off and on (Kueue's two rules, in its default order); the JSON says,
per run, Jain's index over GPU-hours against entitlement, wait per team, preemptions and the
GPU-hours they lost. A figure, not a timed test: the same arguments give the same bytes.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

GROUP = "queuectl.io/v1beta1"
RULES = ("LessThanOrEqualToFinalShare", "LessThanInitialShare")


def manifests(teams: int, gpus: int, grace: int, minimum: int) -> list[tuple[str, Any]]:
    pool = gpus // 2
    each = (gpus - pool) // teams

    def gpu_groups(n: int) -> list[dict[str, Any]]:
        return [
            {
                "coveredResources": ["nvidia.com/gpu"],
                "flavors": [
                    {"name": "h100", "resources": [{"name": "nvidia.com/gpu", "nominalQuota": n}]}
                ],
            }
        ]

    docs: list[dict[str, Any]] = [
        {"apiVersion": GROUP, "kind": "ResourceFlavor", "metadata": {"name": "h100"}, "spec": {}},
        {
            "apiVersion": GROUP,
            "kind": "Cohort",
            "metadata": {"name": "org"},
            "spec": {"resourceGroups": gpu_groups(pool)},
        },
        {
            "apiVersion": GROUP,
            "kind": "WorkloadPriorityClass",
            "metadata": {"name": "batch"},
            "value": 100,
            "preemptionGracePeriodSeconds": grace,
            "minimumRuntimeSeconds": minimum,
        },
    ]
    for i in range(teams):
        team = f"team-{i}"
        docs.append(
            {
                "apiVersion": GROUP,
                "kind": "ClusterQueue",
                "metadata": {"name": team},
                "spec": {
                    "cohortName": "org",
                    "preemption": {
                        "withinClusterQueue": "LowerPriority",
                        "reclaimWithinCohort": "Any",
                    },
                    "resourceGroups": gpu_groups(each),
                },
            }
        )
        docs.append(
            {
                "apiVersion": GROUP,
                "kind": "LocalQueue",
                "metadata": {"name": team, "namespace": team},
                "spec": {"clusterQueue": team},
            }
        )
    return [(f"bench manifest {i}", d) for i, d in enumerate(docs)]


def _figures(summary: dict[str, Any]) -> dict[str, Any]:
    waits = summary["wait_seconds"]
    pre = summary["preemptions"]
    return {
        "jain_index": summary["fairness"]["jain_index"],
        "gpu_allocation_pct": summary["gpu_allocation_pct"]["mean"],
        "wait_overall": {k: waits["overall"][k] for k in ("mean", "p50", "p95")},
        "wait_teams": {
            t: {k: w[k] for k in ("mean", "p50", "p95")} for t, w in waits["teams"].items()
        },
        "team_gpu_hours": summary["team_gpu_hours"],
        "preemptions": pre["total"],
        "preemptions_by_reason": pre["by_reason"],
        "gpu_hours_lost": pre["gpu_hours_lost"],
    }


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="python -m bench fairshare", description=__doc__)
    p.add_argument("--jobs", type=int, default=4000)
    p.add_argument("--days", type=float, default=3.0)
    p.add_argument("--nodes", type=int, default=16, help="8-GPU nodes")
    p.add_argument("--teams", type=int, default=4)
    p.add_argument("--load", type=float, default=0.9)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--grace", type=int, default=300, help="the class's grace period, seconds")
    p.add_argument("--minimum", type=int, default=600, help="its minimum runtime, seconds")
    p.add_argument(
        "--habits",
        default="team-0=always-borrows",
        help="QUEUE=HABIT,... as simulate's --habits (the others take the generator's in turn)",
    )
    args = p.parse_args(argv)
    from queuectl.sim import GenerateOptions, SimOptions, generate_trace, load_config, parse_nodes
    from queuectl.sim import simulate as run_sim

    config = load_config(manifests(args.teams, args.nodes * 8, args.grace, args.minimum))
    nodes = parse_nodes(f"{args.nodes}x8:h100", config)
    habits = dict(part.split("=", 1) for part in args.habits.split(",") if part)
    gen = GenerateOptions(args.jobs, args.days, args.seed, args.load, habits)
    jobs = generate_trace(config, nodes, gen)
    runs: dict[str, Any] = {}
    for label, rules in (("off", ()), ("on", RULES)):
        options = SimOptions(seed=args.seed, fair_preemption=rules)
        runs[label] = _figures(run_sim(config, nodes, jobs, options).summary)
    out = {
        "jobs": args.jobs,
        "days": args.days,
        "gpus": args.nodes * 8,
        "teams": args.teams,
        "load": args.load,
        "seed": args.seed,
        "habits": habits,
        "runs": runs,
    }
    print(json.dumps(out, sort_keys=True))
    return 0
