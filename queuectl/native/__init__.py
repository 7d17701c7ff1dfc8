"""The scheduling core compiled with mypyc: the same sources, about twice as fast in the simulator.

Opt-in, with the sources as the fallback. `python -m queuectl.native` (`__main__`) compiles
every module of `queuectl.core` but its `__init__` into build/native-core/ of the checkout (needs
a C compiler; mypyc comes with mypy). A process started with QUEUECTL_NATIVE_CORE=1 then imports
those modules instead of the sources, but only while the build matches the sources byte for byte
(`STAMP` holds their hash): an edit after the build silently means the sources again, never
stale code. Why not always: compiled classes refuse attribute patching and `copy.deepcopy` of frozen
dataclasses, which core tests use (docs/design/core.md, "Compiled core").
"""

from __future__ import annotations

import hashlib
import os
import sys
from pathlib import Path

ENV = "QUEUECTL_NATIVE_CORE"
CORE = Path(__file__).resolve().parent.parent / "core"
BUILD = Path(__file__).resolve().parents[2] / "build" / "native-core"

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
