"""Every key queuectl writes says whose it is: a new `queuectl.io/...` literal anywhere in the
product code must join the registry (queuectl/api/owned.py) as queuectl's own or as a user's,
or this test names it and the file it is in."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from queuectl.api import owned

ROOT = Path(__file__).resolve().parents[3] / "queuectl"
KEY = re.compile(r"^(?:[a-z0-9-]+\.)?queuectl\.io/[A-Za-z0-9._/-]+$")


def key_literals() -> dict[str, list[str]]:
    """Each string constant that looks like one of our keys -> where it is written."""
    found: dict[str, list[str]] = {}
    for path in sorted(ROOT.rglob("*.py")):
        tree = ast.parse(path.read_text(), filename=str(path))
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Constant)
                and isinstance(node.value, str)
                and KEY.match(node.value)
            ):
                where = f"{path.relative_to(ROOT.parent)}:{node.lineno}"
                found.setdefault(node.value, []).append(where)
    return found


def test_the_walk_finds_the_keys_it_looks_for() -> None:
    found = key_literals()
    assert "queuectl.io/pod-set" in found
    assert "gpu.queuectl.io/gpu-resource" in found


def test_every_key_in_the_code_is_registered_as_ours_or_a_users() -> None:
    unregistered = {
        key: where
        for key, where in key_literals().items()
        if key not in owned.ALL_KEYS and not key.startswith(owned.TEST_ONLY_PREFIX)
    }
    assert not unregistered, (
        "keys written in the code but not in queuectl/api/owned.py (add each to OWNED_* if "
        f"only queuectl writes it, or to USER_* if users set it by design): {unregistered}"
    )


def test_a_key_is_either_ours_or_a_users_never_both() -> None:
    ours = owned.OWNED_LABELS | owned.OWNED_ANNOTATIONS | owned.OWNED_GATES
    theirs = owned.USER_LABELS | owned.USER_ANNOTATIONS | owned.DERIVED_LABELS
    assert not ours & theirs
    assert ours >= owned.SET_BY_MUTATION
