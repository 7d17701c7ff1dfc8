"""Host programs from Debian's packages, installed when missing.

The README's commands must work on a fresh machine, and CI runs as root on one: a program the
tests need (containerd for real nodes, Chromium for the simulate report) is installed with
apt-get when we are root and it is missing; otherwise one clear error names the packages.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable, Mapping
from pathlib import Path

from queuectl.testenv.errors import ToolMissing


def _missing(tools: Mapping[str, str]) -> list[str]:
    return [t for t in tools if shutil.which(t) is None]


def ensure_tools(
    tools: Mapping[str, str], why: str, progress: Callable[[str], None] = print
) -> dict[str, Path]:
    """`tools` maps program -> Debian package. Returns program -> path, installing the missing
    packages first when root with apt-get; raises ToolMissing (naming them) otherwise."""
    packages = sorted({tools[t] for t in _missing(tools)})
    if packages and os.geteuid() == 0 and shutil.which("apt-get"):
        progress(f"Installing {', '.join(packages)} (Debian packages) for {why}")
        env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
        for argv in (["apt-get", "update", "-qq"], ["apt-get", "install", "-y", "-qq", *packages]):
            subprocess.run(argv, env=env, capture_output=True, timeout=900, check=False)
    missing = _missing(tools)
    if missing:
        raise ToolMissing(
            f"{why} needs {', '.join(missing)} on PATH",
            "install the Debian packages: apt-get install "
            + " ".join(sorted({tools[t] for t in missing})),
        )
    return {t: Path(str(shutil.which(t))) for t in tools}
