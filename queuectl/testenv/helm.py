"""Build the Helm CLI once from its Go module and cache it, for the chart's tests.

Like kwok, Helm is built with `go install module@version`, outside the Kubernetes build module
(`gobuild/`), so Helm's own dependency versions never move the pins of the control plane. It has
its own cache directory (`helm-<version>/`), so adding or bumping Helm never rebuilds Kubernetes.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from queuectl.testenv.build import Progress, _run_streaming, build_once, check_go, find_go
from queuectl.testenv.errors import BuildFailed
from queuectl.testenv.versions import pinned

HELM_MODULE = "helm.sh/helm/v3"
HELM_VERSION = "v3.19.0"
HELM_KUBE_MINOR = "34"  # the client-go minor that Helm release pins (its go.mod: v0.34.0)
HELM_ENV = "QUEUECTL_HELM"


def helm_ldflags() -> str:
    """As Helm's Makefile sets them: `helm version` reports the release, and `helm template`
    assumes Kubernetes 1.34 (its client-go) rather than the source default 1.20, which would fail
    a chart's kubeVersion constraint."""
    flags = [f"-X {HELM_MODULE}/internal/version.version={HELM_VERSION}"]
    for package in ("pkg/chartutil", "pkg/lint/rules"):
        flags.append(f"-X {HELM_MODULE}/{package}.k8sVersionMajor=1")
        flags.append(f"-X {HELM_MODULE}/{package}.k8sVersionMinor={HELM_KUBE_MINOR}")
    return " ".join(["-s -w", *flags])


def cache_key() -> str:
    digest = hashlib.sha256(f"{HELM_VERSION};{helm_ldflags()};cgo=0".encode()).hexdigest()
    return f"helm-{HELM_VERSION}-{digest[:12]}"


def ensure_helm(
    progress: Progress = print, *, go: str | None = None, root: Path | None = None
) -> Path:
    """Return the cached `helm` binary for the pinned version, building it the first time."""
    prebuilt = os.environ.get(HELM_ENV)
    if prebuilt:
        if not os.access(prebuilt, os.X_OK):
            raise BuildFailed(
                f"{HELM_ENV}={prebuilt} is not an executable file",
                f"unset {HELM_ENV} to build Helm {HELM_VERSION}, or point it at a helm binary",
            )
        return Path(prebuilt)

    def make(staging: Path, log: Path) -> dict[str, object]:
        toolchain = check_go(find_go(go), pinned().go)
        _run_streaming(
            [
                str(toolchain),
                "install",
                "-v",
                "-trimpath",
                "-ldflags",
                helm_ldflags(),
                f"{HELM_MODULE}/cmd/helm@{HELM_VERSION}",
            ],
            cwd=staging,
            env=dict(os.environ, CGO_ENABLED="0", GOBIN=str(staging)),
            log=log,
            what=f"go install helm {HELM_VERSION}",
            progress=progress,
        )
        return {"helm": HELM_VERSION}

    final = build_once(
        cache_key(),
        make,
        announce=f"Building Helm {HELM_VERSION} (first time only, a few minutes).",
        what="Helm",
        progress=progress,
        root=root,
        complete=lambda d: os.access(d / "helm", os.X_OK),
    )
    return final / "helm"
