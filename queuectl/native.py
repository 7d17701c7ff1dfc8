"""The scheduling core compiled with mypyc: the same sources, about twice as fast in the simulator.

Opt-in, with the sources as the fallback. `python -m queuectl.native` compiles every module of
`queuectl.core` but its `__init__` into build/native-core/ of the checkout (needs a C compiler;
mypyc comes with mypy). A process started with QUEUECTL_NATIVE_CORE=1 then imports those modules
instead of the sources, but only while the build matches the sources byte for byte (`STAMP`
holds their hash): an edit after the build silently means the sources again, never stale code.
Why not always: compiled classes refuse attribute patching and `copy.deepcopy` of frozen
dataclasses, which core tests use (docs/design/core.md, "Compiled core").
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ENV = "QUEUECTL_NATIVE_CORE"
CORE = Path(__file__).resolve().parent / "core"
BUILD = Path(__file__).resolve().parent.parent / "build" / "native-core"

active = False
"""Whether this process imported the compiled core (set when `queuectl.core` is imported)."""


def stamp(core: Path = CORE) -> str:
    """What a build is valid for: the interpreter's ABI tag and every compiled source."""
    h = hashlib.sha256(sys.implementation.cache_tag.encode())
    for src in sorted(core.glob("*.py")):
        if src.name != "__init__.py":
            h.update(src.name.encode() + b"\0" + src.read_bytes() + b"\0")
    return h.hexdigest()


def core_path(path: list[str]) -> list[str]:
    """`queuectl.core.__path__`, with the compiled build first when asked for and fresh."""
    global active
    if os.environ.get(ENV) != "1":
        return path
    try:
        built = (BUILD / "STAMP").read_text().strip()
    except OSError:
        return path
    if built != stamp(Path(path[0])):
        return path
    if str(BUILD) not in sys.path:
        sys.path.append(str(BUILD))  # the shared library every compiled module loads
    active = True
    return [str(BUILD / "queuectl" / "core"), *path]


def build() -> int:
    """Compile the core into `BUILD` (replacing what is there); returns mypyc's exit status."""
    BUILD.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=BUILD.parent) as tmp:
        work = Path(tmp)
        (work / "queuectl" / "core").mkdir(parents=True)
        (work / "queuectl" / "__init__.py").write_text("")
        shutil.copy(Path(__file__), work / "queuectl" / "native.py")
        for src in CORE.glob("*.py"):
            shutil.copy(src, work / "queuectl" / "core" / src.name)
        modules = sorted(
            f"queuectl/core/{p.name}" for p in CORE.glob("*.py") if p.name != "__init__.py"
        )
        done = subprocess.run([sys.executable, "-m", "mypyc", *modules], cwd=work, check=False)
        if done.returncode:
            return done.returncode
        shutil.rmtree(BUILD, ignore_errors=True)
        (BUILD / "queuectl" / "core").mkdir(parents=True)
        for lib in work.glob("*.so"):
            shutil.copy(lib, BUILD / lib.name)
        for lib in (work / "queuectl" / "core").glob("*.so"):
            shutil.copy(lib, BUILD / "queuectl" / "core" / lib.name)
        (BUILD / "STAMP").write_text(stamp(work / "queuectl" / "core") + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(build())
