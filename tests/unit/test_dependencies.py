"""pyproject lists only what the code imports: a dependency nobody imports is weight in every
image and a question for every reviewer (kopf sat there unused for weeks)."""

from __future__ import annotations

import ast
import re
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
# Distribution name -> the module it is imported as, where the two differ.
IMPORT_NAME = {
    "grpcio": "grpc",
    "protobuf": "google",  # google.protobuf, imported by the generated device plugin stubs
    "kubernetes-asyncio": "kubernetes_asyncio",
    "nvidia-ml-py": "pynvml",
    "prometheus-client": "prometheus_client",
    "pyyaml": "yaml",
}


def _distribution(requirement: str) -> str:
    return re.split(r"[<>=!~\[; ]", requirement, maxsplit=1)[0].strip().lower()


def _imported_top_level_modules(root: Path) -> set[str]:
    found: set[str] = set()
    for path in root.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                found.update(alias.name.split(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                found.add(node.module.split(".")[0])
            elif (  # importlib.import_module("pynvml"): loaded lazily where it may be missing
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == "import_module"
                and node.args
                and isinstance(node.args[0], ast.Constant)
                and isinstance(node.args[0].value, str)
            ):
                found.add(node.args[0].value.split(".")[0])
    return found


def test_every_runtime_dependency_is_imported_by_the_package() -> None:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    imported = _imported_top_level_modules(REPO / "queuectl")
    unused = [
        requirement
        for requirement in project["dependencies"]
        if IMPORT_NAME.get(_distribution(requirement), _distribution(requirement)) not in imported
    ]
    assert not unused, f"listed in pyproject but never imported by queuectl/: {unused}"


def test_the_image_lock_pins_every_runtime_dependency_with_hashes() -> None:
    """`make image` and the Dockerfile install from deploy/image/requirements.lock only
    (`--require-hashes`): a dependency added to pyproject but not locked would fail the build."""
    lock = (REPO / "deploy" / "image" / "requirements.lock").read_text()
    pinned = {
        m.group(1).lower().replace("_", "-")
        for m in re.finditer(r"^([A-Za-z0-9_.\-]+)==\S+ \\\n\s+--hash=sha256:", lock, re.M)
    }
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    missing = [r for r in project["dependencies"] if _distribution(r) not in pinned]
    assert not missing, f"not in the lock (run `make lock`): {missing}"
