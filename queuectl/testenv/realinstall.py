"""The install a platform engineer runs, stood up on a local cluster with a real node.

One way for every test of the real install (the kustomize base, the cert-manager overlay, the
e2e scenarios): `make image`'s image (cached, testenv.image) is loaded into the real node's
runtime, and a kustomize tree of deploy/kustomize is applied unchanged but for a thin overlay
that names the local image and pins the controller onto the real node. With `cert_manager`,
real cert-manager (testenv.certmanager) runs against the cluster before the tree is applied.
"""

from __future__ import annotations

import contextlib
import json
import os
import tarfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from queuectl.testenv.build import ensure_binaries
from queuectl.testenv.certmanager import ensure_cert_manager, start_cert_manager
from queuectl.testenv.controlplane import ControlPlane
from queuectl.testenv.image import ensure_image
from queuectl.testenv.nodeconfig import REAL_NODE_LABEL
from queuectl.testenv.realnode import load_image, recorded
from queuectl.testenv.waiting import eventually

REPO = Path(__file__).resolve().parents[2]
KUSTOMIZE = REPO / "deploy" / "kustomize"
BASE = KUSTOMIZE / "base"
CERT_MANAGER_OVERLAY = KUSTOMIZE / "overlays" / "cert-manager"
IMAGE = "localhost/queuectl/queuectl"
NAMESPACE = "queuectl-system"
CONTROLLER_SELECTOR = "app.kubernetes.io/component=controller"
LEASE = "queuectl-controller"


@dataclass(frozen=True)
class RealInstall:
    plane: ControlPlane
    overlay: Path  # what `kubectl apply -k` / `kubectl delete -k` take

    def controller_pods(self) -> list[dict[str, Any]]:
        out = self.plane.kubectl(
            "get", "pods", "-n", NAMESPACE, "-l", CONTROLLER_SELECTOR, "-o", "json"
        ).stdout
        pods: list[dict[str, Any]] = json.loads(out)["items"]
        return pods

    def ready_pods(self) -> list[str]:
        """Names of controller pods that are Ready and not terminating."""
        return sorted(
            p["metadata"]["name"]
            for p in self.controller_pods()
            if not p["metadata"].get("deletionTimestamp")
            and any(
                c["type"] == "Ready" and c["status"] == "True"
                for c in (p.get("status") or {}).get("conditions") or ()
            )
        )

    def wait_ready(self, replicas: int = 2, timeout: float = 240) -> list[str]:
        return eventually(
            self.ready_pods,
            lambda names: len(names) == replicas,
            timeout=timeout,
            what=f"{replicas} Ready controller replicas",
        )

    def lease_holder(self) -> str:
        return self.plane.kubectl(
            "get", "lease", LEASE, "-n", NAMESPACE, "-o", "jsonpath={.spec.holderIdentity}",
            check=False,
        ).stdout  # fmt: skip


def local_overlay(work: Path, tree: Path, tag: str) -> Path:
    """`tree` as shipped, with the local image (never pulled) and the controller on the real
    node; the kwok GPU nodes beside it run no containers."""
    directory = work / f"overlay-{tree.name}"
    directory.mkdir(parents=True, exist_ok=True)
    spec = "/spec/template/spec"
    patch = [
        {"op": "add", "path": f"{spec}/nodeSelector", "value": {REAL_NODE_LABEL: "true"}},
        {"op": "replace", "path": f"{spec}/containers/0/imagePullPolicy", "value": "Never"},
    ]
    kustomization = {
        "apiVersion": "kustomize.config.k8s.io/v1beta1",
        "kind": "Kustomization",
        "resources": [os.path.relpath(tree, directory)],
        "images": [{"name": "queuectl", "newName": IMAGE, "newTag": tag}],
        "patches": [
            {
                "target": {"kind": "Deployment", "name": "queuectl-controller"},
                "patch": json.dumps(patch),
            }
        ],
    }
    (directory / "kustomization.yaml").write_text(json.dumps(kustomization))
    return directory


def _archive(layout: Path, dest: Path) -> Path:
    with tarfile.open(dest, "w") as tar:
        for entry in sorted(layout.iterdir()):
            tar.add(entry, arcname=entry.name)
    return dest


@contextlib.contextmanager
def real_install(
    work: Path, tree: Path = BASE, *, cert_manager: bool = False, gpu_nodes: int = 2
) -> Iterator[RealInstall]:
    """A fresh cluster (one real node, `gpu_nodes` kwok GPU nodes) with `tree` installed;
    everything is stopped on exit."""
    image = ensure_image()
    certs = ensure_cert_manager() if cert_manager else None
    archive = _archive(image.path, work / "image.tar")
    plane = ControlPlane(work / "cluster", name="install", binaries=ensure_binaries(), real_nodes=1)
    try:
        plane.start()
        if gpu_nodes:
            plane.add_gpu_nodes(gpu_nodes)
        (node,) = recorded(plane.work_dir)
        load_image(node, archive, IMAGE)
        if certs is not None:
            start_cert_manager(plane, certs)
        overlay = local_overlay(work, tree, image.tag)
        plane.kubectl("apply", "--server-side", "-k", str(overlay), timeout=300)
        yield RealInstall(plane, overlay)
    finally:
        plane.stop()
