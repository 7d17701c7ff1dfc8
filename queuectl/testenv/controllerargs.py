"""How the local environments start `queuectl controller` as a process (dev up, e2e, the
benchmarks, the fault suite): one place for the module and the ports it listens on. The
visibility API takes any free port (0): several controllers may run side by side."""

from __future__ import annotations

from collections.abc import Sequence


def controller_args(
    kubeconfig: str,
    *,
    webhook_port: int,
    health_port: int,
    metrics_port: int,
    visibility_port: int = 0,
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
        "--visibility-port",
        str(visibility_port),
        *extra,
    ]
