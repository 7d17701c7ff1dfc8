"""`python -m bench <command> [args]`: one entry point for every benchmark.

Each command is a module with a `main(argv: list[str]) -> int`; add a line to COMMANDS to add one.
"""

from __future__ import annotations

import importlib
import sys

COMMANDS: dict[str, tuple[str, str]] = {
    "core": ("bench.core_bench", "the scheduling core alone: admissions/s and cycle latency"),
    "run": ("bench.cluster.cli", "a cluster scenario on testenv (bench/scenarios/*.yaml)"),
    "webhooks": ("bench.webhook_flood", "hostile AdmissionReviews over TLS: 400s, 408s, never 500"),
    "simulate": ("bench.simulate_bench", "queuectl simulate: 7 days, 100,000 jobs, 1,024 GPUs"),
    "fairshare": (
        "bench.fairshare_bench",
        "queuectl simulate with fair-sharing preemption off and on: one team always borrows",
    ),
    "eta": ("bench.eta_bench", "describe's ETA: its cost on thousands of Workloads, no cluster"),
    "chaos": ("bench.chaos.cli", "the fault suite: faults and hostile input under a Job stream"),
    "bypass": ("bench.bypass.cli", "the bypass fuzzer: every generated mutation, as a plain user"),
    "memory": (
        "bench.memory_bench",
        "controller memory at 1,000 queues, 50,000 Workloads, no cluster",
    ),
}


def usage() -> str:
    lines = ["usage: python -m bench <command> [args]", "", "commands:"]
    lines += [f"  {name:<8} {help_}" for name, (_, help_) in COMMANDS.items()]
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    if not argv or argv[0] in ("-h", "--help"):
        print(usage())
        return 0 if argv else 2
    name, rest = argv[0], argv[1:]
    if name not in COMMANDS:
        print(f"unknown command {name!r}\n\n{usage()}", file=sys.stderr)
        return 2
    module = importlib.import_module(COMMANDS[name][0])
    result: int = module.main(rest)
    return result


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
