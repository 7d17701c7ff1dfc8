"""How the local environments start `queuectl controller` as a process (dev up, e2e, the
benchmarks, the fault suite): one place for the module and the three ports it listens on."""

from __future__ import annotations

from collections.abc import Sequence


def controller_args(
    kubeconfig: str,
    *,
    webhook_port: int,
    health_port: int,
    metrics_port: int,
    extra: Sequence[str] = (),
) -> list[str]:
    """The arguments after the Python interpreter (callers may put e.g. a profiler between)."""
    return [
        "-m",
        "queuectl.cli.main",
        "controller",
        "--kubeconfig",
        kubeconfig,
        "--webhook-port",
        str(webhook_port),
        "--health-port",
        str(health_port),
        "--metrics-port",
        str(metrics_port),
        *extra,
    ]
