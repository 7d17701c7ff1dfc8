"""Render the kustomize trees and pick objects out of them, for the deploy tests.

Rendering uses `kubectl kustomize` (kustomize is built into kubectl); without kubectl these tests
fail rather than skip, since an unrendered manifest is an untested one.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest
import yaml

REPO = Path(__file__).resolve().parents[3]
KUSTOMIZE = REPO / "deploy" / "kustomize"
BASE = KUSTOMIZE / "base"
CERT_MANAGER = KUSTOMIZE / "overlays" / "cert-manager"

Obj = dict[str, Any]


def kubectl_binary() -> str:
    found = os.environ.get("KUBECTL") or shutil.which("kubectl")
    if not found:
        pytest.fail("kubectl not found (set KUBECTL or put it on PATH): cannot render kustomize")
    return found


def render(path: Path) -> list[Obj]:
    """The objects `kubectl kustomize path` renders, in order."""
    done = subprocess.run(
        [kubectl_binary(), "kustomize", str(path)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    if done.returncode != 0:
        pytest.fail(f"kubectl kustomize {path} failed:\n{done.stderr}")
    return [doc for doc in yaml.safe_load_all(done.stdout) if doc]


def one(objects: Iterable[Obj], kind: str, name: str | None = None) -> Obj:
    """The only object of this kind (and name); fails the test if there are none or several."""
    found = [
        o for o in objects if o["kind"] == kind and (name is None or o["metadata"]["name"] == name)
    ]
    assert len(found) == 1, f"expected one {kind} {name or ''}, found {len(found)}"
    return found[0]
