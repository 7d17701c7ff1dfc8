"""Speed of `queuectl simulate`: a 7-day generated trace of 100,000 jobs on 1,024 GPUs.

The fleet is 128 nodes of 8 H100 (with `--topology`, in the sample Topology's 8-node racks, and
gangs then prefer a rack); 8 teams have 128 GPUs of
nominal quota each in one cohort, may borrow without limit, reclaim what is lent (Any) and
preempt lower priority inside their queue; three priority classes as in config/samples. The
trace comes from the simulator's own generator (seeded). Prints the wall seconds of the
simulation alone (generation apart) and, last, one JSON object. Not a timed test: a figure.

The core runs compiled when a fresh mypyc build exists (`python -m queuectl.native`; the JSON's
`core` says which ran); `--pure` runs the sources. Decisions are the same either way.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import Any

GROUP = "queuectl.io/v1beta1"


def manifests(teams: int, gpus_each: int, topology: bool) -> list[tuple[str, dict[str, Any]]]:
    docs: list[dict[str, Any]] = [
        {
            "apiVersion": GROUP,
            "kind": "Topology",
            "metadata": {"name": "fabric"},
            "spec": {
                "levels": [
                    {"nodeLabel": "topology.queuectl.io/block"},
                    {"nodeLabel": "topology.queuectl.io/rack"},
                    {"nodeLabel": "kubernetes.io/hostname"},
                ]
            },
        },
        {
            "apiVersion": GROUP,
            "kind": "ResourceFlavor",
            "metadata": {"name": "h100"},
            "spec": {
                "nodeLabels": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"},
                **({"topologyName": "fabric"} if topology else {}),
            },
        },
        {"apiVersion": GROUP, "kind": "Cohort", "metadata": {"name": "org"}},
    ]
    for name, value, grace, minimum in (
        ("production", 10000, 0, 0),
        ("research", 1000, 0, 600),
        ("exploration", 100, 300, 0),
    ):
        docs.append(
            {
                "apiVersion": GROUP,
                "kind": "WorkloadPriorityClass",
                "metadata": {"name": name},
                "value": value,
                "preemptionGracePeriodSeconds": grace,
                "minimumRuntimeSeconds": minimum,
            }
        )
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
                    "resourceGroups": [
                        {
                            "coveredResources": ["nvidia.com/gpu"],
                            "flavors": [
                                {
                                    "name": "h100",
                                    "resources": [
                                        {"name": "nvidia.com/gpu", "nominalQuota": gpus_each}
                                    ],
                                }
                            ],
                        }
                    ],
                },
            }
        )
        docs.append(
            {
                "apiVersion": GROUP,
                "kind": "LocalQueue",
                "metadata": {"name": "default", "namespace": team},
                "spec": {"clusterQueue": team},
            }
        )
    return [(f"bench manifest {i}", d) for i, d in enumerate(docs)]


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="python -m bench simulate", description=__doc__)
    p.add_argument("--jobs", type=int, default=100_000)
    p.add_argument("--days", type=float, default=7.0)
    p.add_argument("--nodes", type=int, default=128, help="8-GPU nodes")
    p.add_argument("--teams", type=int, default=8)
    p.add_argument("--load", type=float, default=0.8)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument(
        "--topology",
        action="store_true",
        help="give the flavor the Topology (the core then places every gang on nodes: slower)",
    )
    p.add_argument(
        "--preemption-patience",
        type=float,
        help="seconds a would-be preemptor may wait for completions (core.patience; 0 = never; "
        "default: the core's)",
    )
    p.add_argument("--pure", action="store_true", help="the core's sources, not its mypyc build")
    args = p.parse_args(argv)
    if "queuectl.core" not in sys.modules:  # the switch is read when it is first imported
        os.environ["QUEUECTL_NATIVE_CORE"] = "0" if args.pure else "1"
    from queuectl import native
    from queuectl.core import DEFAULT_PATIENCE_SECONDS
    from queuectl.sim import GenerateOptions, SimOptions, generate_trace, load_config, parse_nodes
    from queuectl.sim import simulate as run_sim

    gpus = args.nodes * 8
    config = load_config(manifests(args.teams, gpus // args.teams, args.topology))
    nodes = parse_nodes(f"{args.nodes}x8:h100", config)
    t0 = time.perf_counter()
    jobs = generate_trace(
        config, nodes, GenerateOptions(args.jobs, args.days, args.seed, args.load)
    )
    generated = time.perf_counter() - t0

    def progress(fraction: float) -> None:
        sys.stderr.write(
            f"\r{100 * fraction:5.1f}% of jobs done, {time.perf_counter() - t1:6.1f} s"
        )

    t1 = time.perf_counter()
    result = run_sim(
        config,
        nodes,
        jobs,
        SimOptions(
            seed=args.seed,
            preemption_patience=(
                DEFAULT_PATIENCE_SECONDS
                if args.preemption_patience is None
                else args.preemption_patience
            ),
        ),
        progress,
    )
    seconds = time.perf_counter() - t1
    sys.stderr.write("\n")
    s = result.summary
    print(
        json.dumps(
            {
                "jobs": args.jobs,
                "core": "native" if native.active else "pure",
                "topology": args.topology,
                "days": args.days,
                "gpus": gpus,
                "generate_seconds": round(generated, 2),
                "simulate_seconds": round(seconds, 2),
                "cycles": s["sim"]["cycles"],  # type: ignore[index]
                "finished": s["jobs"]["finished"],  # type: ignore[index]
                "gpu_allocation_pct": s["gpu_allocation_pct"]["mean"],  # type: ignore[index]
                "preemptions": s["preemptions"]["total"],  # type: ignore[index]
                "preemption_gpu_hours_lost": s["preemptions"]["gpu_hours_lost"],  # type: ignore[index]
                "wait_p95_s": s["wait_seconds"]["overall"]["p95"],  # type: ignore[index]
            }
        )
    )
    return 0
