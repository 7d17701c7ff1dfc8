"""The house rules of DESIGN.md §1, enforced: imports point down, core is pure, code is clean."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent


def _run(*cmd: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=600)


def test_imports_point_down_and_core_is_pure() -> None:
    result = _run(str(BIN / "lint-imports"))
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_controller_keeps_to_its_rooms() -> None:
    """Inside controller/ the wiring is on top and each room imports only the rooms below it
    (docs/design/controller.md, "Rooms"). The contract is exhaustive, so a new module or room
    fails here until it is given its place; run by id, so removing it fails too."""
    result = _run(str(BIN / "lint-imports"), "--contract", "controller-rooms")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "The controller in rooms" in result.stdout, result.stdout


def test_ruff_is_clean() -> None:
    result = _run(str(BIN / "ruff"), "check", ".")
    assert result.returncode == 0, result.stdout + result.stderr


def test_mypy_strict_is_clean() -> None:
    """The product, the benchmarks (their figures are reported, so their code is kept as
    strictly as the product's) and the end-to-end scenarios (they run only against a cluster,
    so a type error there would otherwise surface late, as a failed CI run)."""
    result = _run(str(BIN / "mypy"), "queuectl", "bench", "e2e")
    assert result.returncode == 0, result.stdout[-5000:] + result.stderr


def test_test_module_basenames_are_unique() -> None:
    """pytest's default import mode keys test modules by basename; two files named alike
    (tests/unit/x/test_a.py and tests/integration/test_a.py) abort collection of the whole run."""
    seen: dict[str, Path] = {}
    clashes = []
    for path in sorted([*ROOT.glob("tests/**/test_*.py"), *ROOT.glob("e2e/**/test_*.py")]):
        if path.name in seen:
            clashes.append(f"{seen[path.name].relative_to(ROOT)} and {path.relative_to(ROOT)}")
        seen.setdefault(path.name, path)
    assert not clashes, "rename one of each pair: " + "; ".join(clashes)
