"""`python -m queuectl.native`: compile the scheduling core with mypyc into build/native-core.

Apart from the loader (`queuectl.native`, which the core imports) because it runs a compiler.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from queuectl import native


def build() -> int:
    """Compile the core into `native.BUILD` (replacing it); returns mypyc's exit status."""
    native.BUILD.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=native.BUILD.parent) as tmp:
        work = Path(tmp)
        (work / "queuectl" / "core").mkdir(parents=True)
        (work / "queuectl" / "__init__.py").write_text("")
        (work / "queuectl" / "native").mkdir()
        shutil.copy(Path(native.__file__), work / "queuectl" / "native" / "__init__.py")
        for src in native.CORE.glob("*.py"):
            shutil.copy(src, work / "queuectl" / "core" / src.name)
        modules = sorted(
            f"queuectl/core/{p.name}" for p in native.CORE.glob("*.py") if p.name != "__init__.py"
        )
        done = subprocess.run([sys.executable, "-m", "mypyc", *modules], cwd=work, check=False)
        if done.returncode:
            return done.returncode
        shutil.rmtree(native.BUILD, ignore_errors=True)
        (native.BUILD / "queuectl" / "core").mkdir(parents=True)
        for lib in work.glob("*.so"):
            shutil.copy(lib, native.BUILD / lib.name)
        for lib in (work / "queuectl" / "core").glob("*.so"):
            shutil.copy(lib, native.BUILD / "queuectl" / "core" / lib.name)
        (native.BUILD / "STAMP").write_text(native.stamp(work / "queuectl" / "core") + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(build())
