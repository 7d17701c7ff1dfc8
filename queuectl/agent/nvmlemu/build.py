"""Build the emulator (`libnvidia-ml.so.1`) with gcc, cached by source hash, and the environment
that makes an unmodified nvidia-ml-py load it.

pynvml opens `CDLL("libnvidia-ml.so.1")`, so a process started with the build directory first
on `LD_LIBRARY_PATH` gets the emulator through the dynamic linker's normal search. The variable is
read when a process starts: set it for a child process, never in the running one.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import shutil
import subprocess
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import yaml

from queuectl.agent.nvmlemu.describe import DescriptionError, compile_description

SOURCES = Path(__file__).resolve().parent
LIBRARY = "libnvidia-ml.so.1"
CFLAGS = [
    "-std=c11",
    "-D_POSIX_C_SOURCE=200809L",
    "-O2",
    "-g",
    "-Wall",
    "-Wextra",
    "-Werror",
    "-fPIC",
    "-fvisibility=hidden",  # export only the NVML_API functions
    "-shared",
    "-Wl,-soname,libnvidia-ml.so.1",
]
LIBS = ["-lpthread", "-lm"]
_CC_HINT = "install gcc (apt-get install gcc) or set CC to a C compiler"


class EmulatorBuildError(RuntimeError):
    """The emulator could not be built; the message says why and what to do."""


def cache_root() -> Path:
    """Where builds and compiled descriptions live ($QUEUECTL_CACHE_DIR or ~/.cache/queuectl)."""
    explicit = os.environ.get("QUEUECTL_CACHE_DIR")
    if explicit:
        return Path(explicit) / "nvml-emu"
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "queuectl" / "nvml-emu"


def source_files() -> list[Path]:
    return sorted([*SOURCES.glob("*.c"), *SOURCES.glob("*.h")])


def compiler() -> str:
    """The C compiler: $CC, else gcc on PATH; `EmulatorBuildError` if there is none."""
    named = os.environ.get("CC") or "gcc"
    found = shutil.which(named)
    if found is None:
        raise EmulatorBuildError(f"C compiler {named!r} not found: {_CC_HINT}")
    return found


def cache_key(cc: str) -> str:
    digest = hashlib.sha256(" ".join([cc, *CFLAGS, *LIBS]).encode())
    for src in source_files():
        digest.update(src.name.encode() + b"\0" + src.read_bytes() + b"\0")
    return digest.hexdigest()[:16]


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    """One builder per key, across processes (parallel test workers)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def build_library(root: Path | None = None) -> Path:
    """The directory holding a fresh `libnvidia-ml.so.1` (built now unless cached)."""
    cc = compiler()
    out_dir = (root or cache_root()) / f"lib-{cache_key(cc)}"
    target = out_dir / LIBRARY
    if target.exists():
        return out_dir
    with _locked(out_dir.with_suffix(".lock")):
        if target.exists():
            return out_dir
        out_dir.mkdir(parents=True, exist_ok=True)
        partial = out_dir / f".{LIBRARY}.{os.getpid()}"
        argv = [cc, *CFLAGS, "-o", str(partial), *map(str, SOURCES.glob("*.c")), *LIBS]
        try:
            done = subprocess.run(argv, capture_output=True, text=True, timeout=300)
        except (OSError, subprocess.SubprocessError) as exc:
            raise EmulatorBuildError(f"{cc} did not run ({exc}): {_CC_HINT}") from exc
        if done.returncode != 0:
            partial.unlink(missing_ok=True)
            raise EmulatorBuildError(
                f"building the NVML emulator failed ({' '.join(argv)}):\n{done.stderr.strip()}"
            )
        partial.replace(target)
    return out_dir


def load_description(path: Path) -> Mapping[str, Any]:
    try:
        data = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise DescriptionError(f"{path}: cannot read the node description: {exc}") from None
    return data or {}


def write_description(description: Path | Mapping[str, Any], out: Path | None = None) -> Path:
    """Compile a description (a YAML file or its mapping) into `out`, or into the cache under
    its content hash (so a process that execs another can leave it behind)."""
    data = load_description(description) if isinstance(description, Path) else description
    try:
        text = compile_description(data)
    except DescriptionError as exc:
        where = f"{description}: " if isinstance(description, Path) else ""
        raise DescriptionError(f"{where}{exc}") from None
    if out is None:
        name = hashlib.sha256(text.encode()).hexdigest()[:16]
        out = cache_root() / "nodes" / f"{name}.emu"
    out.parent.mkdir(parents=True, exist_ok=True)
    partial = out.with_name(f".{out.name}.{os.getpid()}")
    partial.write_text(text)
    partial.replace(out)
    return out


def environment(
    compiled: Path,
    library_dir: Path,
    *,
    scale: float | None = None,
    offset: float | None = None,
    epoch: float | None = None,
    clock_file: Path | None = None,
    base: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """The environment of a child process whose NVML is the emulated node `compiled`.

    Emulated time: `clock_file` (a number of seconds a test rewrites) if given, else
    (now - `epoch`) * `scale` + `offset`; the epoch defaults to the child's first nvmlInit.
    """
    env = dict(os.environ if base is None else base)
    previous = env.get("LD_LIBRARY_PATH")
    env["LD_LIBRARY_PATH"] = f"{library_dir}:{previous}" if previous else str(library_dir)
    env["QUEUECTL_NVML_EMU"] = str(compiled)
    settings = {"SCALE": scale, "OFFSET": offset, "EPOCH": epoch, "CLOCK": clock_file}
    for name, value in settings.items():
        key = f"QUEUECTL_NVML_EMU_{name}"
        if value is None:
            env.pop(key, None)
        else:
            env[key] = str(value)
    return env
