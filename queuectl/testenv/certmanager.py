"""Real cert-manager for the local cluster: its controller and CA injector, built once from the
published Go module and run as processes against the API server, with its CRDs installed.

cert-manager's own commands live in nested Go modules (cmd/controller, cmd/cainjector) that the
module proxy does not serve; the library module github.com/cert-manager/cert-manager is served,
so `gocertmanager/` holds two small mains that wire its packages (the controllers queuectl's
overlay uses: self-signed and CA issuers, Certificates, the approver; and the injector for
webhook configurations). Its webhook is not run: the overlay needs no conversion or defaulting
(the CRDs serve v1 only), and a missing validating webhook only skips validation.
Processes, not pods: the kwok nodes run no containers, and the controller needs no image then.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from queuectl.testenv.build import (
    Progress,
    _run_streaming,
    build_once,
    check_go,
    find_go,
)
from queuectl.testenv.errors import BuildFailed
from queuectl.testenv.versions import _required, gobuild_dir, pinned

if TYPE_CHECKING:
    from queuectl.testenv.controlplane import ControlPlane

CERT_MANAGER_MODULE = "github.com/cert-manager/cert-manager"
PROGRAMS = {"controller": "cert-manager-controller", "cainjector": "cert-manager-cainjector"}
_SOURCES = ("go.mod", "go.sum", "controller/main.go", "cainjector/main.go")


def gocertmanager_dir() -> Path:
    return gobuild_dir().parent / "gocertmanager"


def version() -> str:
    """The cert-manager release the build module requires (its go.mod is the one pin)."""
    return _required((gocertmanager_dir() / "go.mod").read_text(), CERT_MANAGER_MODULE)


def cache_key() -> str:
    digest = hashlib.sha256()
    for name in _SOURCES:
        digest.update(name.encode() + b"\0" + (gocertmanager_dir() / name).read_bytes())
    digest.update(b"ldflags=-s -w;cgo=0")
    return f"cert-manager-{version()}-{digest.hexdigest()[:12]}"


@dataclass(frozen=True)
class CertManagerBinaries:
    dir: Path

    @property
    def controller(self) -> Path:
        return self.dir / PROGRAMS["controller"]

    @property
    def cainjector(self) -> Path:
        return self.dir / PROGRAMS["cainjector"]

    @property
    def crds(self) -> list[Path]:
        return sorted((self.dir / "crds").glob("*.yaml"))


def _complete(d: Path) -> bool:
    built = CertManagerBinaries(d)
    return all(os.access(p, os.X_OK) for p in (built.controller, built.cainjector)) and bool(
        built.crds
    )


def ensure_cert_manager(
    progress: Progress = print, *, go: str | None = None, root: Path | None = None
) -> CertManagerBinaries:
    """Return the cached cert-manager programs and CRDs, building them the first time."""

    def compile_into(staging: Path, log: Path) -> dict[str, object]:
        toolchain = check_go(find_go(go), pinned().go)
        argv = [str(toolchain), "build", "-v", "-trimpath", "-ldflags", "-s -w"]
        _run_streaming(
            [*argv, "-o", f"{staging}/", "./controller", "./cainjector"],
            cwd=gocertmanager_dir(),
            env=dict(os.environ, CGO_ENABLED="0"),
            log=log,
            what=f"go build (cert-manager {release})",
            progress=progress,
        )
        for source, name in PROGRAMS.items():
            (staging / source).rename(staging / name)
        _copy_crds(toolchain, release, staging / "crds")
        return {"cert-manager": release}

    release = version()
    final = build_once(
        cache_key(),
        compile_into,
        announce=f"Building cert-manager {release} (first time only, ~5-10 min on 2 cores).",
        what="cert-manager",
        progress=progress,
        root=root,
        complete=_complete,
    )
    return CertManagerBinaries(final)


def _copy_crds(go: Path, release: str, dest: Path) -> None:
    """The release's CRDs (deploy/crds of the module, plain YAML) from the module cache."""
    done = subprocess.run(
        [str(go), "mod", "download", "-json", f"{CERT_MANAGER_MODULE}@{release}"],
        cwd=gocertmanager_dir(),
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    source = Path(json.loads(done.stdout or "{}").get("Dir", "")) / "deploy" / "crds"
    if done.returncode != 0 or not source.is_dir():
        raise BuildFailed(
            f"cert-manager {release}'s CRDs were not found ({done.stderr.strip()[-300:]})",
            "check network access to the Go module proxy, then run again",
        )
    dest.mkdir()
    for crd in sorted(source.glob("*.yaml")):
        shutil.copyfile(crd, dest / crd.name)


def start_cert_manager(plane: ControlPlane, binaries: CertManagerBinaries) -> None:
    """Install the CRDs (server-side apply, waited until Established), then start the
    controller and the CA injector as supervised processes of `plane` (stopped with it)."""
    for crd in binaries.crds:
        plane.kubectl("apply", "--server-side", "-f", str(crd), timeout=120)
    names = [f"crd/{_crd_name(c)}" for c in binaries.crds]
    plane.kubectl("wait", "--for=condition=Established", "--timeout=120s", *names, timeout=150)
    common = ["--kubeconfig", plane.kubeconfig]
    plane.start_process(PROGRAMS["controller"], [str(binaries.controller), *common])
    plane.start_process(PROGRAMS["cainjector"], [str(binaries.cainjector), *common])


def _crd_name(path: Path) -> str:
    """`cert-manager.io_certificates.yaml` -> `certificates.cert-manager.io` (controller-gen's
    file naming: group, underscore, plural)."""
    group, plural = path.stem.split("_", 1)
    return f"{plural}.{group}"
