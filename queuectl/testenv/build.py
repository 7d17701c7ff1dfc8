"""Build the control-plane binaries once from Go modules and cache them per pinned version.

Why build: this machine class has no container engine, so kind/k3d cannot run; the Go module
proxy is reachable, so etcd, kube-apiserver, kube-controller-manager, kube-scheduler (one pinned
Kubernetes release) and kwok are compiled from source into a user cache directory keyed by a hash
of the build module, the kwok version and the build flags. Nothing is ever written into the repo.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import re
import shutil
import subprocess
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from queuectl.testenv.errors import BuildFailed, GoToolchainMissing
from queuectl.testenv.versions import KWOK_MODULE, Versions, gobuild_dir, pinned

Progress = Callable[[str], None]

BINARY_NAMES = ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok")
GO_PACKAGES = (
    "k8s.io/kubernetes/cmd/kube-apiserver",
    "k8s.io/kubernetes/cmd/kube-controller-manager",
    "k8s.io/kubernetes/cmd/kube-scheduler",
    "go.etcd.io/etcd/server/v3",  # a main package; `go build -o dir/` names it `server`
)
GO_INSTALL_HINT = (
    "install Go {need} or newer from https://go.dev/dl/ and put its bin/ on PATH "
    "(or set QUEUECTL_GO=/path/to/go), or point QUEUECTL_TESTENV_BINARIES at a directory "
    "holding prebuilt " + ", ".join(BINARY_NAMES)
)
_MARKER = "VERSIONS.json"


@dataclass(frozen=True)
class Binaries:
    """A directory holding the five control-plane programs."""

    dir: Path

    def path(self, name: str) -> Path:
        return self.dir / name

    def missing(self) -> list[str]:
        return [n for n in BINARY_NAMES if not os.access(self.path(n), os.X_OK)]


def ldflags(v: Versions) -> str:
    """Version ldflags so that `kube-apiserver --version` tells the truth (not v0.0.0-master)."""
    return " ".join(
        [
            "-s -w",
            f"-X k8s.io/component-base/version.gitVersion={v.kubernetes}",
            "-X k8s.io/component-base/version.gitMajor=1",
            f"-X k8s.io/component-base/version.gitMinor={v.kubernetes_minor}",
            f"-X k8s.io/client-go/pkg/version.gitVersion={v.kubernetes}",
        ]
    )


def cache_root() -> Path:
    explicit = os.environ.get("QUEUECTL_CACHE_DIR")
    if explicit:
        return Path(explicit) / "testenv"
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "queuectl" / "testenv"


def cache_key(v: Versions) -> str:
    digest = hashlib.sha256()
    for name in ("go.mod", "go.sum"):
        lines = (gobuild_dir() / name).read_text().splitlines()
        digest.update("\n".join(x for x in lines if not x.startswith("//")).encode())
    digest.update(f"kwok={v.kwok};ldflags={ldflags(v)};cgo=0".encode())
    return f"k8s-{v.kubernetes}-{digest.hexdigest()[:12]}"


def find_go(explicit: str | None = None) -> Path | None:
    for candidate in (explicit, os.environ.get("QUEUECTL_GO")):
        if candidate:
            return Path(candidate) if os.access(candidate, os.X_OK) else None
    found = shutil.which("go")
    if found:
        return Path(found)
    fallback = Path("/usr/local/go/bin/go")
    return fallback if os.access(fallback, os.X_OK) else None


def _version_tuple(text: str) -> tuple[int, ...]:
    """`go1.26.8` -> (1, 26, 8); `go1.27rc1` -> (1, 27): leading digits of each part."""
    parts = text.removeprefix("go").split(".")[:3]
    return tuple(int(m.group()) if (m := re.match(r"\d+", p)) else 0 for p in parts)


def check_go(go: Path | None, need: str) -> Path:
    """Return a Go toolchain at least as new as `need`, or raise one clear error."""
    hint = GO_INSTALL_HINT.format(need=need)
    if go is None:
        raise GoToolchainMissing("the Go toolchain (`go`) was not found", hint)
    try:
        out = subprocess.run(
            [str(go), "env", "GOVERSION"], capture_output=True, text=True, timeout=60, check=True
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError) as exc:
        raise GoToolchainMissing(f"{go} does not run ({exc})", hint) from exc
    if _version_tuple(out) < _version_tuple(need):
        raise GoToolchainMissing(f"{go} is {out}, older than go{need}", hint)
    return go


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    """One builder per cache key, even across processes (two terminals, CI retries)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _run_streaming(
    argv: list[str], *, cwd: Path, env: dict[str, str], log: Path, what: str, progress: Progress
) -> None:
    """Run a go command, log everything, print a progress line every 15 s, fail clearly."""
    tail: deque[str] = deque(maxlen=25)
    count = [0]
    with log.open("a") as sink:
        sink.write(f"$ {' '.join(argv)}\n")
        sink.flush()
        proc = subprocess.Popen(
            argv, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        )
        assert proc.stdout is not None
        stream = proc.stdout

        def pump() -> None:
            for line in stream:
                sink.write(line)
                tail.append(line.rstrip())
                count[0] += 1

        reader = threading.Thread(target=pump, daemon=True)
        reader.start()
        started = last = time.monotonic()
        while proc.poll() is None:
            time.sleep(0.5)
            if time.monotonic() - last >= 15:
                last = time.monotonic()
                progress(
                    f"  {what}: {count[0]} packages so far, {last - started:.0f}s elapsed "
                    f"(log: {log})"
                )
        reader.join(timeout=5)
    if proc.returncode != 0:
        raise BuildFailed(
            f"{what} failed (exit code {proc.returncode})",
            "read the build log; check network access to the Go module proxy (GOPROXY), free "
            "disk space and the Go version; then run the command again (the cache resumes)",
            f"log: {log}\n" + "\n".join(f"  | {line}" for line in tail),
        )


def build(dest: Path, *, go: Path, versions: Versions, progress: Progress, log: Path) -> None:
    """Compile the five programs into `dest`."""
    env = dict(os.environ, CGO_ENABLED="0")
    dest.mkdir(parents=True, exist_ok=True)
    argv = [str(go), "build", "-v", "-trimpath", "-ldflags", ldflags(versions), "-o", f"{dest}/"]
    _run_streaming(
        [*argv, *GO_PACKAGES],
        cwd=gobuild_dir(),
        env=env,
        log=log,
        what=f"go build (Kubernetes {versions.kubernetes}, etcd {versions.etcd})",
        progress=progress,
    )
    (dest / "server").rename(dest / "etcd")
    _run_streaming(
        [str(go), "install", "-v", f"{KWOK_MODULE}/cmd/kwok@{versions.kwok}"],
        cwd=dest,
        env=dict(env, GOBIN=str(dest)),
        log=log,
        what=f"go install kwok {versions.kwok}",
        progress=progress,
    )


def build_once(
    name: str,
    make: Callable[[Path, Path], dict[str, object]],
    *,
    announce: str,
    what: str,
    progress: Progress,
    root: Path | None = None,
    complete: Callable[[Path], bool] = lambda _: True,
) -> Path:
    """Return `<cache root>/<name>`, calling `make(staging, log)` the first time only.

    The one build-once pattern every testenv build uses (control plane, real-node programs,
    Helm, operators): one builder per cache key even across processes (a file lock), a staging
    directory renamed into place only when the build succeeded (an interrupted build never looks
    done), and a marker recording what `make` returned plus how long it took.
    """
    root = root or cache_root()
    final = root / name

    def done() -> bool:
        return (final / _MARKER).exists() and complete(final)

    if done():
        return final
    with _locked(root / f"{name}.lock"):
        if done():
            return final  # another process built it while we waited
        staging = root / f"{name}.partial"
        shutil.rmtree(staging, ignore_errors=True)
        staging.mkdir(parents=True)
        log = root / f"{name}.build.log"
        log.unlink(missing_ok=True)
        progress(announce)
        started = time.monotonic()
        record = make(staging, log)
        seconds = time.monotonic() - started
        record = {**record, "build_seconds": round(seconds, 1)}
        (staging / _MARKER).write_text(json.dumps(record, indent=2))
        shutil.rmtree(final, ignore_errors=True)
        staging.rename(final)
        progress(f"Built {what} in {seconds:.0f}s.")
    return final


def ensure_binaries(
    progress: Progress = print, *, go: str | None = None, root: Path | None = None
) -> Binaries:
    """Return cached binaries for the pinned versions, building them the first time."""
    prebuilt = os.environ.get("QUEUECTL_TESTENV_BINARIES")
    if prebuilt:
        binaries = Binaries(Path(prebuilt))
        if binaries.missing():
            raise BuildFailed(
                f"QUEUECTL_TESTENV_BINARIES={prebuilt} lacks {', '.join(binaries.missing())}",
                "unset QUEUECTL_TESTENV_BINARIES to build them, or point it at a complete set",
            )
        return binaries
    versions = pinned()
    key = cache_key(versions)

    def run(staging: Path, log: Path) -> dict[str, object]:
        toolchain = check_go(find_go(go), versions.go)
        build(staging, go=toolchain, versions=versions, progress=progress, log=log)
        return {"versions": versions.__dict__}

    final = build_once(
        key,
        run,
        announce=(
            f"Building the local control plane (Kubernetes {versions.kubernetes}, etcd "
            f"{versions.etcd}, kwok {versions.kwok}) into {(root or cache_root()) / key}.\n"
            "  First time only: a cold build downloads ~1.5 GB of modules and takes 15-30 min "
            "on 2 cores; later runs reuse the cache."
        ),
        what="the control plane",
        progress=progress,
        root=root,
        complete=lambda d: not Binaries(d).missing(),
    )
    return Binaries(final)
