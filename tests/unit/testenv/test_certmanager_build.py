"""Building cert-manager for the install tests: its library module, our two mains, cached once."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from queuectl.testenv import build, certmanager
from queuectl.testenv.certmanager import CertManagerBinaries, cache_key, ensure_cert_manager
from queuectl.testenv.versions import pinned


def test_the_pinned_release_is_read_from_the_build_modules_go_mod() -> None:
    assert certmanager.version() == "v1.21.2"
    assert cache_key().startswith("cert-manager-v1.21.2-")
    assert cache_key() != build.cache_key(pinned())


@pytest.mark.parametrize(
    ("file", "name"),
    [
        ("cert-manager.io_certificates.yaml", "certificates.cert-manager.io"),
        ("acme.cert-manager.io_challenges.yaml", "challenges.acme.cert-manager.io"),
    ],
)
def test_crd_names_follow_controller_gens_file_names(file: str, name: str) -> None:
    assert certmanager._crd_name(Path(file)) == name


def fake_go(tmp_path: Path, crds: Path) -> Path:
    """A `go` that builds two empty programs and 'downloads' a module holding one CRD."""
    script = tmp_path / "go"
    script.write_text(
        "#!/bin/sh\n"
        f'if [ "$1" = env ]; then echo go{pinned().go}; exit 0; fi\n'
        f'echo "$*" >> {tmp_path}/calls\n'
        f'if [ "$1" = mod ]; then echo \'{{"Dir": "{crds}"}}\'; exit 0; fi\n'
        'out=$(echo "$*" | sed -n "s/.*-o \\([^ ]*\\).*/\\1/p")\n'
        'for p in controller cainjector; do printf "#!/bin/sh\\n" > "$out/$p"; '
        'chmod +x "$out/$p"; done\n'
    )
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return script


def test_cert_manager_is_built_once_with_its_crds(tmp_path: Path) -> None:
    module = tmp_path / "module"
    (module / "deploy" / "crds").mkdir(parents=True)
    (module / "deploy" / "crds" / "cert-manager.io_issuers.yaml").write_text("kind: CRD\n")
    go = fake_go(tmp_path, module)
    first = ensure_cert_manager(lambda _: None, go=str(go), root=tmp_path / "cache")
    second = ensure_cert_manager(lambda _: None, go=str(go), root=tmp_path / "cache")

    assert first == second == CertManagerBinaries(tmp_path / "cache" / cache_key())
    assert first.controller.name == "cert-manager-controller"
    assert [c.name for c in first.crds] == ["cert-manager.io_issuers.yaml"]
    calls = (tmp_path / "calls").read_text().splitlines()
    assert len(calls) == 2  # one build, one module download: the second call found the cache
    assert "./controller ./cainjector" in calls[0]
