"""What tests and tools need from any cluster: a kubeconfig, kubectl, a client, fake GPU nodes.

`Cluster` works on any kubeconfig (e.g. one `queuectl dev up` started, reused by the tests);
`ControlPlane` extends it with the processes it owns.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client as k8s
from kubernetes import config as k8s_config
from kubernetes.client.exceptions import ApiException

from queuectl.testenv.errors import ComponentFailed, ToolMissing
from queuectl.testenv.nodes import H100, FakeNode, GpuNodeSpec, create_gpu_nodes

FIELD_MANAGER = "queuectl-testenv"
"""The field manager of everything the testenv applies server-side."""


def find_kubectl() -> str:
    explicit = os.environ.get("QUEUECTL_KUBECTL")
    found = explicit or shutil.which("kubectl")
    if not found:
        raise ToolMissing(
            "kubectl was not found on PATH",
            "install kubectl (https://kubernetes.io/docs/tasks/tools/) or set "
            "QUEUECTL_KUBECTL=/path/to/kubectl",
        )
    return found


class KubectlFailed(subprocess.CalledProcessError):
    """A failed kubectl call whose message carries kubectl's own stderr."""

    def __str__(self) -> str:
        return f"{super().__str__()}\n{(self.stderr or '').strip()}"


class Cluster:
    """A reachable cluster, known by its admin kubeconfig."""

    def __init__(self, kubeconfig: str | Path) -> None:
        self.kubeconfig = str(kubeconfig)

    def api_client(self) -> k8s.ApiClient:
        """A new synchronous client; the caller closes it."""
        api: k8s.ApiClient = k8s_config.new_client_from_config(  # type: ignore[no-untyped-call]
            config_file=self.kubeconfig
        )
        return api

    def kubectl(
        self, *args: str, check: bool = True, input: str | None = None, timeout: float = 120
    ) -> subprocess.CompletedProcess[str]:
        """Run kubectl against this cluster; with check, a failure raises with its stderr."""
        argv = [find_kubectl(), f"--kubeconfig={self.kubeconfig}", *args]
        done = subprocess.run(
            argv, input=input, capture_output=True, text=True, timeout=timeout, check=False
        )
        if check and done.returncode != 0:
            raise KubectlFailed(done.returncode, argv, output=done.stdout, stderr=done.stderr)
        return done

    def apply_server_side(
        self, manifest: Any = None, *, path: str | None = None, force_conflicts: bool = False
    ) -> None:
        """Server-side apply as the testenv's field manager: a manifest (an object, or a `List`
        of them) or a file; with force_conflicts, fields another manager owns are taken."""
        if (manifest is None) == (path is None):
            raise ValueError("apply_server_side takes a manifest or a path, not both or neither")
        force = ["--force-conflicts"] if force_conflicts else []
        source = path or "-"
        text = None if manifest is None else yaml.safe_dump(manifest)
        self.kubectl(
            "apply", "--server-side", *force, f"--field-manager={FIELD_MANAGER}", "-f", source,
            input=text,
        )  # fmt: skip

    def add_gpu_nodes(
        self,
        count: int,
        gpus_per_node: int = 8,
        product: str = H100,
        memory_mib: int = 81559,
        *,
        blocks: int = 1,
        racks_per_block: int = 1,
        name_prefix: str = "gpu",
        labels: dict[str, str] | None = None,
        taints: list[dict[str, str]] | None = None,
        timeout: float = 90.0,
        mig_layout: str | None = None,
        replicas: int = 1,
    ) -> list[FakeNode]:
        """Create kwok GPU nodes and wait until they are Ready and schedulable."""
        spec = GpuNodeSpec(
            count=count,
            gpus_per_node=gpus_per_node,
            product=product,
            memory_mib=memory_mib,
            blocks=blocks,
            racks_per_block=racks_per_block,
            name_prefix=name_prefix,
            labels=dict(labels or {}),
            taints=list(taints or []),
            mig_layout=mig_layout,
            replicas=replicas,
        )
        with self.api_client() as api:
            return create_gpu_nodes(api, spec, timeout=timeout)

    def wait_for_service_account(
        self, namespace: str, name: str = "default", timeout: float = 30.0
    ) -> None:
        """Pods cannot be created before their service account exists (ServiceAccount admission)."""
        deadline = time.monotonic() + timeout
        with self.api_client() as api:
            core = k8s.CoreV1Api(api)
            while True:
                try:
                    core.read_namespaced_service_account(name, namespace)
                    return
                except ApiException as exc:
                    if exc.status != 404:
                        raise
                if time.monotonic() > deadline:
                    raise ComponentFailed(
                        f"service account {namespace}/{name} did not appear in {timeout:.0f}s",
                        "kube-controller-manager creates it; read its log",
                    )
                time.sleep(0.1)
