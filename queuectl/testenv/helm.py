"""Build the Helm CLI once from its Go module and cache it, for the chart's tests.

Like kwok, Helm is built with `go install module@version`, outside the Kubernetes build module
(`gobuild/`), so Helm's own dependency versions never move the pins of the control plane. Each
release has its own cache directory (`helm-<version>-<hash>/`), so adding or bumping Helm never
rebuilds Kubernetes. Two majors are tested: v3 (what most platform teams run) and v4.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path

from queuectl.testenv.build import (
    Progress,
    _run_streaming,
    build_once,
    check_go,
    find_go,
)
from queuectl.testenv.errors import BuildFailed
from queuectl.testenv.versions import pinned


@dataclass(frozen=True)
class HelmRelease:
    """One Helm release: its module, the client-go minor its go.mod pins, and the packages
    whose `k8sVersionMajor/Minor` variables set the Kubernetes version `helm template` assumes."""

    module: str
    version: str
    kube_minor: str
    version_packages: tuple[str, ...]
    env: str  # names a prebuilt binary instead

    def ldflags(self) -> str:
        """As Helm's Makefile sets them: `helm version` reports the release, and `helm template`
        assumes the Kubernetes of its client-go rather than the source default 1.20, which would
        fail a chart's kubeVersion constraint."""
        flags = [f"-X {self.module}/internal/version.version={self.version}"]
        for package in self.version_packages:
            flags.append(f"-X {self.module}/{package}.k8sVersionMajor=1")
            flags.append(f"-X {self.module}/{package}.k8sVersionMinor={self.kube_minor}")
        return " ".join(["-s -w", *flags])

    def cache_key(self) -> str:
        digest = hashlib.sha256(f"{self.version};{self.ldflags()};cgo=0".encode()).hexdigest()
        return f"helm-{self.version}-{digest[:12]}"


HELM_V3 = HelmRelease(
    module="helm.sh/helm/v3",
    version="v3.19.0",
    kube_minor="34",  # its go.mod: client-go v0.34.0
    version_packages=("pkg/chartutil", "pkg/lint/rules"),
    env="QUEUECTL_HELM",
)
# v4 moved the variables (its Makefile still names older paths; these are where the source
# declares them in v4.0.0).
HELM_V4 = HelmRelease(
    module="helm.sh/helm/v4",
    version="v4.0.0",
    kube_minor="34",  # its go.mod: client-go v0.34.1
    version_packages=(
        "pkg/chart/common",
        "pkg/chart/v2/lint/rules",
        "internal/chart/v3/lint/rules",
    ),
    env="QUEUECTL_HELM4",
)
HELM_VERSION = HELM_V3.version
HELM_ENV = HELM_V3.env


def helm_ldflags(release: HelmRelease = HELM_V3) -> str:
    return release.ldflags()


def cache_key(release: HelmRelease = HELM_V3) -> str:
    return release.cache_key()


def ensure_helm(
    progress: Progress = print,
    *,
    go: str | None = None,
    root: Path | None = None,
    release: HelmRelease = HELM_V3,
) -> Path:
    """Return the cached `helm` binary of `release`, building it the first time."""
    prebuilt = os.environ.get(release.env)
    if prebuilt:
        if not os.access(prebuilt, os.X_OK):
            raise BuildFailed(
                f"{release.env}={prebuilt} is not an executable file",
                f"unset {release.env} to build Helm {release.version}, or point it at a helm "
                "binary",
            )
        return Path(prebuilt)

    def install_into(staging: Path, log: Path) -> dict[str, object]:
        toolchain = check_go(find_go(go), pinned().go)
        _run_streaming(
            [
                str(toolchain),
                "install",
                "-v",
                "-trimpath",
                "-ldflags",
                release.ldflags(),
                f"{release.module}/cmd/helm@{release.version}",
            ],
            cwd=staging,
            env=dict(os.environ, CGO_ENABLED="0", GOBIN=str(staging)),
            log=log,
            what=f"go install helm {release.version}",
            progress=progress,
        )
        return {"helm": release.version}

    final = build_once(
        release.cache_key(),
        install_into,
        announce=f"Building Helm {release.version} (first time only, a few minutes).",
        what=f"Helm {release.version}",
        progress=progress,
        root=root,
        complete=lambda d: os.access(d / "helm", os.X_OK),
    )
    return final / "helm"
