"""The compiled core is used only when asked for and only while it matches the sources."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from queuectl import native


def _build(tmp_path: Path, stamp: str) -> Path:
    build = tmp_path / "native-core"
    (build / "queuectl" / "core").mkdir(parents=True)
    (build / "STAMP").write_text(stamp + "\n")
    return build


@pytest.fixture
def core(tmp_path: Path) -> Path:
    src = tmp_path / "src" / "core"
    src.mkdir(parents=True)
    (src / "__init__.py").write_text("")
    (src / "assign.py").write_text("X = 1\n")
    return src


def test_a_fresh_build_goes_first_only_when_asked_for(
    tmp_path: Path, core: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    build = _build(tmp_path, native.stamp(core))
    monkeypatch.setattr(native, "BUILD", build)
    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.setattr(native, "active", False)
    monkeypatch.delenv(native.ENV, raising=False)
    assert native.core_path([str(core)]) == [str(core)]
    monkeypatch.setenv(native.ENV, "1")
    assert native.core_path([str(core)]) == [str(build / "queuectl" / "core"), str(core)]
    assert str(build) in sys.path
    assert native.active


def test_an_edit_after_the_build_means_the_sources(
    tmp_path: Path, core: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    build = _build(tmp_path, native.stamp(core))
    monkeypatch.setattr(native, "BUILD", build)
    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.setenv(native.ENV, "1")
    (core / "assign.py").write_text("X = 2\n")
    assert native.core_path([str(core)]) == [str(core)]
    (build / "STAMP").unlink()
    assert native.core_path([str(core)]) == [str(core)]
