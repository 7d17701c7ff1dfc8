"""A real local Kubernetes control plane for development, tests, e2e and benchmarks.

Public interface: `ControlPlane` (start/stop, kubeconfig, kubectl, add_gpu_nodes,
start_process), `Cluster` (the same helpers for any kubeconfig), `ensure_binaries`,
`eventually`, and the errors in `queuectl.testenv.errors`. Fixtures live in `pytest_plugin`.
"""

from queuectl.testenv.build import Binaries, ensure_binaries
from queuectl.testenv.cluster import Cluster
from queuectl.testenv.controlplane import ControlPlane
from queuectl.testenv.errors import (
    BuildFailed,
    ComponentFailed,
    GoToolchainMissing,
    PortInUse,
    TestEnvError,
    ToolMissing,
)
from queuectl.testenv.nodes import A100, H100, FakeNode, GpuNodeSpec
from queuectl.testenv.waiting import WaitTimeout, eventually

__all__ = [
    "A100",
    "H100",
    "Binaries",
    "BuildFailed",
    "Cluster",
    "ComponentFailed",
    "ControlPlane",
    "FakeNode",
    "GoToolchainMissing",
    "GpuNodeSpec",
    "PortInUse",
    "TestEnvError",
    "ToolMissing",
    "WaitTimeout",
    "ensure_binaries",
    "eventually",
]
