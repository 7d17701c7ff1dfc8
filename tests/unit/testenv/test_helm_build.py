"""Building Helm for the chart's tests: `go install` outside the Kubernetes module, cached once."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from queuectl.testenv import build
from queuectl.testenv.errors import BuildFailed
from queuectl.testenv.helm import HELM_V4, HELM_VERSION, cache_key, ensure_helm, helm_ldflags
from queuectl.testenv.versions import gobuild_dir, pinned


def fake_go(tmp_path: Path) -> Path:
    """A `go` that reports a new enough version and, asked to install, writes $GOBIN/helm and
    records its arguments and working directory."""
    script = tmp_path / "go"
    script.write_text(
        "#!/bin/sh\n"
        f'if [ "$1" = env ]; then echo go{pinned().go}; exit 0; fi\n'
        f'echo "$PWD $*" >> {tmp_path}/calls\n'
        'printf "#!/bin/sh\\necho helm\\n" > "$GOBIN/helm"; chmod +x "$GOBIN/helm"\n'
    )
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return script


def test_helm_is_installed_from_its_module_outside_the_kubernetes_build_and_cached_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("QUEUECTL_HELM", raising=False)
    go = fake_go(tmp_path)
    first = ensure_helm(lambda _: None, go=str(go), root=tmp_path / "cache")
    second = ensure_helm(lambda _: None, go=str(go), root=tmp_path / "cache")

    assert first == second == tmp_path / "cache" / cache_key() / "helm"
    (call,) = (tmp_path / "calls").read_text().splitlines()  # the second found the cache
    cwd, args = call.split(" ", 1)
    assert args.startswith("install") and f"helm.sh/helm/v3/cmd/helm@{HELM_VERSION}" in args
    assert Path(cwd) != gobuild_dir()  # Helm's dependencies never touch Kubernetes' go.mod


def test_helm_has_its_own_cache_key_so_bumping_it_never_rebuilds_kubernetes() -> None:
    assert cache_key().startswith(f"helm-{HELM_VERSION}-")
    assert cache_key() != build.cache_key(pinned())


def test_ldflags_set_the_version_and_a_kubernetes_version_newer_than_the_default() -> None:
    flags = helm_ldflags()
    assert f"internal/version.version={HELM_VERSION}" in flags
    assert "pkg/chartutil.k8sVersionMinor=34" in flags  # the source default 1.20 fails kubeVersion


def test_a_prebuilt_helm_that_is_not_executable_is_refused_naming_the_variable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("QUEUECTL_HELM", str(tmp_path / "nope"))
    with pytest.raises(BuildFailed, match=r"QUEUECTL_HELM=.*not an executable"):
        ensure_helm(lambda _: None, root=tmp_path / "cache")


def test_helm_v4_has_its_own_module_cache_and_the_v4_locations_of_the_version_variables() -> None:
    assert HELM_V4.cache_key().startswith("helm-v4.0.0-")
    assert HELM_V4.cache_key() != cache_key()
    flags = HELM_V4.ldflags()
    assert "helm.sh/helm/v4/internal/version.version=v4.0.0" in flags
    assert "helm.sh/helm/v4/pkg/chart/common.k8sVersionMinor=34" in flags


def test_helm_v4_is_installed_from_the_v4_module(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(HELM_V4.env, raising=False)
    go = fake_go(tmp_path)
    built = ensure_helm(lambda _: None, go=str(go), root=tmp_path / "cache", release=HELM_V4)
    assert built == tmp_path / "cache" / HELM_V4.cache_key() / "helm"
    (call,) = (tmp_path / "calls").read_text().splitlines()
    assert "helm.sh/helm/v4/cmd/helm@v4.0.0" in call
