"""Running a workload operator against the local control plane: its CRDs, its process, its
webhooks.

Each runs like kube-controller-manager: a supervised process with its log in
`logs/operator-<name>.log`, stopped by `ControlPlane.stop()` and `queuectl dev down`; its own
webhooks are registered with the API server by URL (operatorhooks).
"""

from __future__ import annotations

import os
import urllib.error
import urllib.request
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client as k8s

from queuectl.testenv.build import Progress
from queuectl.testenv.cluster import Cluster
from queuectl.testenv.controlplane import ControlPlane
from queuectl.testenv.errors import BuildFailed, ComponentFailed
from queuectl.testenv.operatorargs import HOST, RunDir
from queuectl.testenv.operatorbuild import build, module_dir
from queuectl.testenv.operatorhooks import rewrite
from queuectl.testenv.operators import lookup
from queuectl.testenv.ports import free_ports
from queuectl.testenv.readiness import Probe, http_probe, insecure_tls, wait_ready
from queuectl.testenv.waiting import WaitTimeout, eventually


def _holds_crd(path: Path) -> bool:
    """Whether a manifest holds a CRD (a glob also matches a kustomization.yaml beside them,
    as Trainer's manifests/base/crds/ has, which kubectl cannot apply)."""
    docs = yaml.safe_load_all(path.read_text())
    return any(isinstance(d, dict) and d.get("kind") == "CustomResourceDefinition" for d in docs)


def crd_files(name: str) -> list[Path]:
    op = lookup(name)
    base = module_dir(op)
    found = sorted({p for pattern in op.crds for p in base.glob(pattern) if _holds_crd(p)})
    if not found:
        raise BuildFailed(
            f"no CRD manifests under {base} for {', '.join(op.crds)}",
            "the operator's module layout changed: update its `crds` in OPERATORS",
        )
    return found


def install_crds(cluster: Cluster, name: str, *, timeout: float = 60) -> list[str]:
    """Server-side apply the operator's own CRDs and wait until they are Established."""
    names: list[str] = []
    for path in crd_files(name):
        for doc in yaml.safe_load_all(path.read_text()):
            if isinstance(doc, dict) and doc.get("kind") == "CustomResourceDefinition":
                names.append(str(doc["metadata"]["name"]))
        cluster.apply_server_side(path=str(path), force_conflicts=True)
    with cluster.api_client() as api:
        ext = k8s.ApiextensionsV1Api(api)

        def established() -> list[str]:
            waiting = []
            for crd_name in names:
                status = ext.read_custom_resource_definition(crd_name).status
                conditions = status.conditions if status is not None else None
                if not any(
                    c.type == "Established" and c.status == "True" for c in conditions or []
                ):
                    waiting.append(crd_name)
            return waiting

        try:
            eventually(established, lambda left: not left, timeout=timeout, what="CRDs Established")
        except WaitTimeout as exc:
            raise ComponentFailed(
                f"the {name} CRDs were not Established in {timeout:.0f}s",
                "read the API server log",
                str(exc),
            ) from exc
    return names


def crds_installed(cluster: Cluster, name: str) -> bool:
    """Whether every CRD the operator owns is served (its manifests name them)."""
    wanted = {
        str(doc["metadata"]["name"])
        for path in crd_files(name)
        for doc in yaml.safe_load_all(path.read_text())
        if isinstance(doc, dict) and doc.get("kind") == "CustomResourceDefinition"
    }
    with cluster.api_client() as api:
        items = k8s.ApiextensionsV1Api(api).list_custom_resource_definition().items
        have = {c.metadata.name for c in items if c.metadata is not None}
    return wanted <= have


def process_name(name: str) -> str:
    return f"operator-{name}"


def ensure_running(plane: ControlPlane, name: str, progress: Progress | None = None) -> None:
    """Start the operator, or start it again when its process has died: mpi-operator exits
    when it cannot renew its leader Lease for a few seconds, as across a restart of the API
    server (the fault tests), and the tests after such a restart would meet it dead."""
    record = plane.supervisor.get(process_name(name))
    if record is not None and record.alive():
        return
    if record is not None:
        (progress or plane.progress)(f"  {process_name(name)} exited; starting it again")
        plane.supervisor.forget(process_name(name))
    start(plane, name, progress)


def start(plane: ControlPlane, name: str, progress: Progress | None = None) -> Path:
    """Build (once), install the CRDs and run the operator; returns its binary."""
    op = lookup(name)
    say = progress or plane.progress
    binary = build(name, say)
    for other in (*op.needs_crds_of, name):
        install_crds(plane, other)
    if op.prepare is not None:
        op.prepare(plane)
    run = RunDir.create(plane.work_dir / "operators" / name, *free_ports(2))
    hooks: list[str] = []
    if op.webhooks is not None:
        # Before the start: training-operator's rotator waits for its configuration to exist
        # before it reports ready; the others' hooks only see their own kinds and pods, which
        # nobody creates before start() returns.
        register_webhooks(plane, name, run)
        hooks = webhook_urls(name, run)
    env = {**os.environ, "KUBECONFIG": plane.kubeconfig, "TMPDIR": str(run.tmp), **op.env}
    url = op.ready_url or f"http://{HOST}:{run.health_port}/readyz"
    ready = _serving(http_probe(url), hooks)
    if op.after_start is None:
        plane.start_process(process_name(name), op.argv(binary, run), ready=ready, env=env)
        return binary
    record = plane.start_process(process_name(name), op.argv(binary, run), env=env)
    op.after_start(plane)
    wait_ready(record, ready, timeout=plane.timeout, what=process_name(name))
    return binary


def _serving(ready: Probe, hooks: Sequence[str]) -> Probe:
    """Ready once /readyz answers and every webhook path is served: a controller-runtime
    operator (JobSet) reports ready before it registers its webhook handlers (after its certs
    rotate in), and a create in that gap fails with "could not find the requested resource"."""
    context = insecure_tls()

    def served(url: str) -> bool:
        request = urllib.request.Request(url, data=b"{}", method="POST")
        request.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(request, timeout=2, context=context):
                return True
        except urllib.error.HTTPError as err:
            return err.code != 404  # a bad review is answered: the handler is there
        except (urllib.error.URLError, OSError, ValueError):
            return False

    return lambda: ready() and all(served(url) for url in hooks)


def _configs(name: str, run: RunDir) -> list[dict[str, Any]]:
    """The operator's own webhook configurations, pointed at its port (operatorhooks)."""
    op = lookup(name)
    assert op.webhooks is not None
    docs = [
        doc
        for path in sorted(module_dir(op).glob(op.webhooks))
        for doc in yaml.safe_load_all(path.read_text())
    ]
    return rewrite(
        docs,
        operator=name,
        port=run.webhook_port,
        ca_pem=(run.cert_dir / "ca.crt").read_bytes(),
        pod_label=op.pod_label,
        name=op.webhook_config_name,
        failure_policy=op.webhook_failure_policy,
    )


def webhook_urls(name: str, run: RunDir) -> list[str]:
    """Every URL the API server calls for the operator's webhooks."""
    return sorted(
        {str(hook["clientConfig"]["url"]) for c in _configs(name, run) for hook in c["webhooks"]}
    )


def register_webhooks(cluster: Cluster, name: str, run: RunDir) -> list[str]:
    """Point the API server at the running operator's own webhooks (see operatorhooks)."""
    configs = _configs(name, run)
    manifest = {"apiVersion": "v1", "kind": "List", "items": configs}
    cluster.apply_server_side(manifest, force_conflicts=True)
    return [str(c["metadata"]["name"]) for c in configs]


def start_all(plane: ControlPlane, names: Sequence[str], progress: Progress | None = None) -> None:
    for name in names:
        start(plane, name, progress)
