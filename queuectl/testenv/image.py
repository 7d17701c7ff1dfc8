"""The queuectl image for tests that run it (runc, a real node): built once by
deploy/image/build.sh and cached under the testenv cache, keyed by a hash of everything that goes
into it, so a warm run (CI on the same machine, a second test module) reuses it in seconds.

`QUEUECTL_IMAGE_OCI` names a layout built elsewhere from this tree and skips the build.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from queuectl.testenv.build import cache_root
from queuectl.testenv.errors import TestEnvError

REPO = Path(__file__).resolve().parents[2]
BUILD_SCRIPT = REPO / "deploy" / "image" / "build.sh"
# What the image is made of: a change to any of these is a new image.
INPUTS = ("deploy/image", "pyproject.toml", "README.md", "queuectl")
BUILD_TIMEOUT_S = 1800.0


@dataclass(frozen=True)
class ImageLayout:
    """An OCI image layout holding `queuectl:<tag>`, and its manifest digest."""

    path: Path
    tag: str
    digest: str


def inputs_hash(repo: Path = REPO) -> str:
    digest = hashlib.sha256()
    for top in INPUTS:
        root = repo / top
        files = sorted(root.rglob("*")) if root.is_dir() else [root]
        for f in files:
            if f.is_file() and "__pycache__" not in f.parts and f.suffix != ".pyc":
                digest.update(str(f.relative_to(repo)).encode() + b"\0" + f.read_bytes() + b"\0")
    return digest.hexdigest()[:12]


def read_layout(path: Path) -> ImageLayout:
    [manifest] = json.loads((path / "index.json").read_text())["manifests"]
    tag = manifest["annotations"]["org.opencontainers.image.ref.name"]
    return ImageLayout(path, tag, manifest["digest"])


def ensure_image(progress: Callable[[str], None] = lambda _: None) -> ImageLayout:
    prebuilt = os.environ.get("QUEUECTL_IMAGE_OCI")
    if prebuilt:
        return read_layout(Path(prebuilt))
    work = cache_root() / "image" / inputs_hash()
    layout = work / "oci"
    if (work / "digest.txt").exists() and (layout / "index.json").exists():
        return read_layout(layout)
    shutil.rmtree(work, ignore_errors=True)
    progress(f"building the queuectl image (deploy/image/build.sh, a few minutes) into {work}")
    env = {**os.environ, "WORK": str(work), "PY": sys.executable}
    done = subprocess.run(
        ["bash", str(BUILD_SCRIPT)],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=BUILD_TIMEOUT_S,
        check=False,
    )
    if done.returncode != 0:
        shutil.rmtree(work, ignore_errors=True)
        raise TestEnvError(
            f"deploy/image/build.sh failed (exit {done.returncode})",
            "it needs root, mmdebstrap and umoci (apt-get), and Debian's packages and PyPI "
            "reachable; run `make image` to see the whole log",
            done.stdout[-2000:] + done.stderr[-2000:],
        )
    built = read_layout(layout)
    printed = done.stdout.strip().splitlines()[-1].rsplit(" ", 1)[-1]
    if printed != built.digest or (work / "digest.txt").read_text().strip() != built.digest:
        raise TestEnvError(
            f"build.sh printed digest {printed}, but the layout holds {built.digest}",
            "a bug in deploy/image/build.sh: the digest it reports must be the manifest's",
        )
    return built
