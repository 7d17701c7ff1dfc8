"""The versions the local control plane pins, read from the build module so they cannot drift.

The Go module in `gobuild/` is the single source of truth for Kubernetes and etcd; kwok is
installed with `go install` at the version below.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

KWOK_MODULE = "sigs.k8s.io/kwok"
KWOK_VERSION = "v0.8.0"
KUBERNETES_MODULE = "k8s.io/kubernetes"
ETCD_MODULE = "go.etcd.io/etcd/server/v3"


def gobuild_dir() -> Path:
    """The directory of the Go build module shipped inside the package."""
    return Path(str(resources.files("queuectl.testenv") / "gobuild"))


@dataclass(frozen=True)
class Versions:
    kubernetes: str
    etcd: str
    kwok: str
    go: str

    @property
    def kubernetes_minor(self) -> str:
        return self.kubernetes.lstrip("v").split(".")[1]


def _required(gomod: str, module: str) -> str:
    match = re.search(rf"^\s*(?:require\s+)?{re.escape(module)}\s+(v\S+)", gomod, re.MULTILINE)
    if match is None:
        raise ValueError(f"{module} is not required by the build module's go.mod")
    return match.group(1)


def parse_gomod(gomod: str) -> Versions:
    """Extract the pinned versions from the text of gobuild/go.mod."""
    go = re.search(r"^go\s+(\S+)", gomod, re.MULTILINE)
    if go is None:
        raise ValueError("go.mod has no go line")
    return Versions(
        kubernetes=_required(gomod, KUBERNETES_MODULE),
        etcd=_required(gomod, ETCD_MODULE),
        kwok=KWOK_VERSION,
        go=go.group(1),
    )


def pinned() -> Versions:
    return parse_gomod((gobuild_dir() / "go.mod").read_text())
