"""Building the binaries: pinned versions, cache keys, and one clear error per failure."""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path

import pytest

from queuectl.testenv import build
from queuectl.testenv.build import Binaries, check_go, ensure_binaries, find_go, ldflags
from queuectl.testenv.errors import BuildFailed, GoToolchainMissing
from queuectl.testenv.versions import Versions, parse_gomod, pinned

GOMOD = """module x

go 1.26.0

require (
\tgo.etcd.io/etcd/server/v3 v3.6.8
\tk8s.io/kubernetes v1.36.3
)
"""


def test_the_build_module_pins_one_kubernetes_release_and_etcd_3_6() -> None:
    versions = pinned()
    assert versions.kubernetes.startswith("v1.")
    assert versions.etcd.startswith("v3.6.")
    assert parse_gomod(GOMOD) == Versions("v1.36.3", "v3.6.8", versions.kwok, "1.26.0")


def test_version_ldflags_make_version_tell_the_truth() -> None:
    flags = ldflags(Versions("v1.36.3", "v3.6.8", "v0.8.0", "1.26.0"))
    assert "k8s.io/component-base/version.gitVersion=v1.36.3" in flags
    assert "k8s.io/component-base/version.gitMinor=36" in flags
    assert "k8s.io/client-go/pkg/version.gitVersion=v1.36.3" in flags


def fake_go(tmp_path: Path, version: str) -> Path:
    script = tmp_path / "go"
    script.write_text(f"#!/bin/sh\necho {version}\n")
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return script


def test_missing_go_names_the_fix(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # no go here
    monkeypatch.delenv("QUEUECTL_GO", raising=False)
    monkeypatch.delenv("QUEUECTL_TESTENV_BINARIES", raising=False)
    monkeypatch.setattr(build, "find_go", lambda explicit=None: None)
    with pytest.raises(GoToolchainMissing) as caught:
        ensure_binaries(lambda _: None, root=tmp_path / "cache")
    message = str(caught.value)
    assert "`go`) was not found" in message
    assert "https://go.dev/dl/" in message and "QUEUECTL_GO" in message


@pytest.mark.parametrize(
    ("reported", "ok"),
    [("go1.26.8", True), ("go1.26.0", True), ("go1.27rc1", True), ("go1.25.9", False)],
)
def test_go_must_be_new_enough(tmp_path: Path, reported: str, ok: bool) -> None:
    go = fake_go(tmp_path, reported)
    if ok:
        assert check_go(go, "1.26.0") == go
    else:
        with pytest.raises(GoToolchainMissing, match=r"older than go1\.26\.0"):
            check_go(go, "1.26.0")


def test_an_explicit_go_that_does_not_exist_is_not_replaced_by_another(tmp_path: Path) -> None:
    assert find_go(str(tmp_path / "nope")) is None


def test_prebuilt_binaries_must_be_complete(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "etcd").write_text("")
    os.chmod(tmp_path / "etcd", 0o755)
    monkeypatch.setenv("QUEUECTL_TESTENV_BINARIES", str(tmp_path))
    with pytest.raises(BuildFailed, match="lacks kube-apiserver"):
        ensure_binaries(lambda _: None)


def test_a_failed_build_reports_its_log_tail(tmp_path: Path) -> None:
    log = tmp_path / "build.log"
    with pytest.raises(BuildFailed) as caught:
        build._run_streaming(
            ["sh", "-c", "echo 'go: module lookup disabled'; exit 1"],
            cwd=tmp_path,
            env=dict(os.environ),
            log=log,
            what="go build",
            progress=lambda _: None,
        )
    assert "go build failed (exit code 1)" in str(caught.value)
    assert "module lookup disabled" in str(caught.value)
    assert "GOPROXY" in caught.value.fix


def test_cache_lives_outside_the_repo_and_is_keyed_by_version(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("QUEUECTL_CACHE_DIR", str(tmp_path))
    assert build.cache_root() == tmp_path / "testenv"
    versions = pinned()
    key = build.cache_key(versions)
    assert versions.kubernetes in key
    other = Versions(versions.kubernetes, versions.etcd, "v9.9.9", versions.go)
    assert build.cache_key(other) != key


def test_binaries_report_what_is_missing(tmp_path: Path) -> None:
    assert Binaries(tmp_path).missing() == list(build.BINARY_NAMES)


@pytest.mark.parametrize(
    ("text", "parsed"),
    [("go1.26.8", (1, 26, 8)), ("go1.27rc1", (1, 27)), ("1.26.0", (1, 26, 0))],
)
def test_go_versions_compare_by_number(text: str, parsed: tuple[int, ...]) -> None:
    assert build._version_tuple(text) == parsed


def test_go_mod_regeneration_maps_every_staging_module_to_its_release_tag() -> None:
    from queuectl.testenv import gomod

    upstream = (
        "replace (\n\tk8s.io/api => ./staging/src/k8s.io/api\n"
        "\tk8s.io/client-go => ./staging/src/k8s.io/client-go\n"
        "\tgithub.com/x/y => github.com/x/y v1.0.0\n)\n"
    )
    staging = gomod.staging_modules(upstream)
    assert staging == ["k8s.io/api", "k8s.io/client-go"]
    text = gomod.render("v1.36.3", "v3.6.8", "1.26.0", staging)
    assert "\tk8s.io/client-go => k8s.io/client-go v0.36.3\n" in text
    assert parse_gomod(text).kubernetes == "v1.36.3"


def test_the_committed_go_mod_replaces_every_staging_module_with_the_release_tag() -> None:
    from queuectl.testenv import gomod
    from queuectl.testenv.versions import gobuild_dir

    text = (gobuild_dir() / "go.mod").read_text()
    tag = gomod.staging_version(pinned().kubernetes)
    replaced = re.findall(r"^\t(k8s\.io/[\w.-]+) => \1 (v\S+)$", text, re.MULTILINE)
    assert len(replaced) >= 30
    assert {version for _, version in replaced} == {tag}
