"""Building a workload operator: its pinned Go module, once, into the testenv cache.

The cache entry is keyed by module, version and build flags (`cache_key`), so a bump in the
table (operators.OPERATORS) builds again and nothing else does.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
from pathlib import Path

from queuectl.testenv.build import Progress, _run_streaming, build_once, check_go, find_go
from queuectl.testenv.errors import BuildFailed
from queuectl.testenv.operators import Operator, lookup
from queuectl.testenv.versions import pinned

_LDFLAGS = "-s -w"


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
    info = json.loads(done.stdout)
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
