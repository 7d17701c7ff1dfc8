"""The cached test image is rebuilt exactly when something that goes into it changes."""

from __future__ import annotations

from pathlib import Path

from queuectl.testenv.image import inputs_hash


def tree(root: Path) -> Path:
    for rel, text in {
        "deploy/image/build.sh": "#!/bin/sh\n",
        "deploy/image/requirements.lock": "aiohttp==3 \\\n",
        "pyproject.toml": "[project]\n",
        "README.md": "# queuectl\n",
        "queuectl/core/cycle.py": "x = 1\n",
        "tests/unit/test_x.py": "y = 1\n",
    }.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


def test_a_source_or_lock_change_is_a_new_image_and_a_test_change_is_not(tmp_path: Path) -> None:
    repo = tree(tmp_path)
    first = inputs_hash(repo)
    (repo / "tests/unit/test_x.py").write_text("y = 2\n")
    (repo / "queuectl/core/__pycache__").mkdir()
    (repo / "queuectl/core/__pycache__/cycle.cpython-311.pyc").write_bytes(b"\0")
    assert inputs_hash(repo) == first
    (repo / "queuectl/core/cycle.py").write_text("x = 2\n")
    second = inputs_hash(repo)
    assert second != first
    (repo / "deploy/image/requirements.lock").write_text("aiohttp==4 \\\n")
    assert inputs_hash(repo) not in (first, second)
