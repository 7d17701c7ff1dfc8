"""The workload operators queuectl queues (JobSet, LWS, KubeRay, Kubeflow), as real processes.

Each is built from its own Go module at a pinned release, once, into the testenv cache (keyed
by module, version and build flags), its CRDs are applied from that module's own manifests, and
it runs against the local control plane like kube-controller-manager: a supervised process with
its log in `logs/operator-<name>.log`, stopped by `ControlPlane.stop()` and `queuectl dev down`.

How each is run (flags, what is switched off and why) is in OPERATORS below and in
docs/design/testenv.md.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from queuectl.testenv.build import Progress, _run_streaming, build_once, check_go, find_go
from queuectl.testenv.cluster import Cluster
from queuectl.testenv.controlplane import ControlPlane
from queuectl.testenv.errors import BuildFailed, TestEnvError
from queuectl.testenv.operatorargs import RunDir, kubebuilder_config
from queuectl.testenv.ports import free_ports
from queuectl.testenv.readiness import http_probe
from queuectl.testenv.versions import pinned

_LDFLAGS = "-s -w"


class UnknownOperator(TestEnvError):
    """An operator name that is not in the table."""


@dataclass(frozen=True)
class Operator:
    """One operator: where its code is, which CRDs it owns and how it is run."""

    name: str
    module: str
    version: str
    package: str  # the main package, inside `module`
    crds: tuple[str, ...]  # globs relative to the module's root
    argv: Callable[[Path, RunDir], list[str]]  # (binary, run dir) -> command line
    notes: str  # what is switched off and why, for the docs and `dev up`
    go_directive: str = "1.25.0"
    extra_env: dict[str, str] = field(default_factory=dict)

    @property
    def binary_name(self) -> str:
        return f"{self.name}-operator"


def _kubebuilder(group: str) -> Callable[[Path, RunDir], list[str]]:
    """JobSet and LWS share kubebuilder's component-config shape: one --config file."""

    def argv(binary: Path, run: RunDir) -> list[str]:
        run.config.write_text(kubebuilder_config(group, run))
        return [str(binary), f"--config={run.config}", "--leader-elect=false", "--zap-devel=false"]

    return argv


OPERATORS: dict[str, Operator] = {
    op.name: op
    for op in (
        Operator(
            name="jobset",
            module="sigs.k8s.io/jobset",
            version="v0.11.0",
            package="sigs.k8s.io/jobset",
            crds=("config/components/crd/bases/*.yaml",),
            argv=_kubebuilder("config.jobset.x-k8s.io/v1alpha1"),
            notes="internal cert management off; its webhook server gets a self-signed cert "
            "but is not registered with the API server; metrics off",
        ),
        Operator(
            name="lws",
            module="sigs.k8s.io/lws",
            version="v0.7.0",
            package="sigs.k8s.io/lws/cmd",
            crds=("config/crd/bases/*.yaml",),
            argv=_kubebuilder("config.lws.x-k8s.io/v1alpha1"),
            notes="internal cert management off; its webhook server gets a self-signed cert "
            "but is not registered with the API server; metrics off",
        ),
    )
}


def known() -> str:
    return ", ".join(OPERATORS)


def lookup(name: str) -> Operator:
    try:
        return OPERATORS[name]
    except KeyError:
        raise UnknownOperator(
            f"unknown operator {name!r}", f"choose from: {known()} (or `all`)"
        ) from None


def parse_names(text: str) -> list[str]:
    """`jobset,lws` or `all` -> operator names, each checked; order follows the table."""
    words = [w.strip() for w in text.split(",") if w.strip()]
    if words == ["all"]:
        return list(OPERATORS)
    for word in words:
        lookup(word)
    return [n for n in OPERATORS if n in words]


# ---- build -------------------------------------------------------------------------------
def cache_key(op: Operator) -> str:
    digest = hashlib.sha256(
        f"{op.module}@{op.version};{op.package};{_LDFLAGS};cgo=0".encode()
    ).hexdigest()
    return f"operator-{op.name}-{op.version}-{digest[:12]}"


def _build_module(op: Operator, directory: Path) -> None:
    """A throwaway module that requires only the operator, seeded with the operator's go.sum,
    so `go build -mod=mod` resolves exactly the operator's own dependency versions. Needed
    because `go install module@version` asks the proxy for the module's version list (for
    deprecation notices), which the proxy here refuses for some of these modules."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "go.mod").write_text(
        f"module queuectl.io/testenv/operator/{op.name}\n\ngo {op.go_directive}\n\n"
        f"require {op.module} {op.version}\n"
    )
    (directory / "go.sum").write_text((module_dir(op) / "go.sum").read_text())


def module_dir(op: Operator) -> Path:
    """The operator's source in the Go module cache (downloaded on first use)."""
    go = check_go(find_go(), pinned().go)
    done = subprocess.run(
        [str(go), "mod", "download", "-json", f"{op.module}@{op.version}"],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    if done.returncode != 0:
        raise BuildFailed(
            f"cannot download {op.module}@{op.version}",
            "check access to the Go module proxy (GOPROXY) and that it serves this version",
            (done.stdout + done.stderr).strip()[-2000:],
        )
    info = yaml.safe_load(done.stdout)
    return Path(str(info["Dir"]))


def build(name: str, progress: Progress = print, *, root: Path | None = None) -> Path:
    """The operator's binary for its pinned version, built the first time only."""
    op = lookup(name)

    def make(staging: Path, log: Path) -> dict[str, object]:
        go = check_go(find_go(), pinned().go)
        _build_module(op, staging / "module")
        _run_streaming(
            [
                str(go),
                "build",
                "-mod=mod",
                "-v",
                "-trimpath",
                "-ldflags",
                _LDFLAGS,
                "-o",
                str(staging / op.binary_name),
                op.package,
            ],
            cwd=staging / "module",
            env=dict(os.environ, CGO_ENABLED="0"),
            log=log,
            what=f"go build {op.module} {op.version}",
            progress=progress,
        )
        return {"module": op.module, "version": op.version, "package": op.package}

    final = build_once(
        cache_key(op),
        make,
        announce=f"Building the {op.name} operator ({op.module} {op.version}), first time "
        "only: a few minutes on 2 cores; later runs reuse the cache.",
        what=f"the {op.name} operator",
        progress=progress,
        root=root,
        complete=lambda d: os.access(d / op.binary_name, os.X_OK),
    )
    return final / op.binary_name


# ---- CRDs and process --------------------------------------------------------------------
def crd_files(name: str) -> list[Path]:
    op = lookup(name)
    base = module_dir(op)
    found = sorted({p for pattern in op.crds for p in base.glob(pattern)})
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
        cluster.kubectl(
            "apply",
            "--server-side",
            "--force-conflicts",
            "--field-manager=queuectl-testenv",
            "-f",
            str(path),
        )
    cluster.kubectl(
        "wait",
        "--for=condition=Established",
        f"--timeout={timeout:.0f}s",
        *(f"crd/{n}" for n in names),
        timeout=timeout + 30,
    )
    return names


def process_name(name: str) -> str:
    return f"operator-{name}"


def start(plane: ControlPlane, name: str, progress: Progress | None = None) -> Path:
    """Build (once), install the CRDs and run the operator; returns its binary."""
    op = lookup(name)
    say = progress or plane.progress
    binary = build(name, say)
    install_crds(plane, name)
    run = RunDir.create(plane.work_dir / "operators" / name, *free_ports(2))
    plane.start_process(
        process_name(name),
        op.argv(binary, run),
        ready=http_probe(f"http://127.0.0.1:{run.health_port}/readyz"),
        env=dict(os.environ, KUBECONFIG=plane.kubeconfig, **op.extra_env),
    )
    return binary


def start_all(plane: ControlPlane, names: Sequence[str], progress: Progress | None = None) -> None:
    for name in names:
        start(plane, name, progress)
