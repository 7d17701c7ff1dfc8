"""The image a platform engineer deploys, built here without Docker or a registry and run with
runc the way a kubelet would run it: non-root, read-only root filesystem, from the OCI layout
`make image` writes. Needs root, network access to Debian's packages and PyPI (as CI has)."""

from __future__ import annotations

import json
import subprocess
import uuid
from pathlib import Path

import pytest

from queuectl.testenv.image import ensure_image

REPO = Path(__file__).resolve().parents[1]
BUILD = REPO / "deploy" / "image" / "build.sh"


@pytest.fixture(scope="module")
def image() -> tuple[Path, str, str]:
    """(OCI layout, tag, digest) of the `make image` build of this tree (cached by its inputs:
    `ensure_image` checks the digest build.sh printed against the layout's manifest)."""
    built = ensure_image()
    return built.path, built.tag, built.digest


def run_in_container(layout: Path, tag: str, bundle: Path, args: list[str]) -> tuple[int, str]:
    """Unpack the image as an OCI runtime bundle and run `args` as its process, read-only."""
    subprocess.run(
        ["umoci", "unpack", "--image", f"{layout}:{tag}", str(bundle)],
        check=True,
        capture_output=True,
    )
    config_path = bundle / "config.json"
    config = json.loads(config_path.read_text())
    config["process"]["args"] = args
    config["process"]["terminal"] = False
    config["root"]["readonly"] = True
    config_path.write_text(json.dumps(config))
    done = subprocess.run(
        ["runc", "run", f"queuectl-image-{uuid.uuid4().hex[:8]}"],
        cwd=bundle,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    return done.returncode, done.stdout + done.stderr


def test_the_digest_recorded_is_the_layouts_manifest(image: tuple[Path, str, str]) -> None:
    layout, tag, digest = image
    index = json.loads((layout / "index.json").read_text())
    [manifest] = index["manifests"]
    assert manifest["digest"] == digest == (layout.parent / "digest.txt").read_text().strip()
    assert manifest["annotations"]["org.opencontainers.image.ref.name"] == tag


def test_the_image_config_is_non_root_with_the_queuectl_entrypoint(
    image: tuple[Path, str, str],
) -> None:
    layout, _, digest = image
    blobs = layout / "blobs" / "sha256"
    manifest = json.loads((blobs / digest.split(":")[1]).read_text())
    config = json.loads((blobs / manifest["config"]["digest"].split(":")[1]).read_text())
    assert config["config"]["User"] == "65532:65532"
    assert config["config"]["Entrypoint"] == ["queuectl"]
    assert config["config"]["Cmd"] == ["controller"]


def test_the_controller_starts_its_imports_as_uid_65532_on_a_read_only_root(
    image: tuple[Path, str, str], tmp_path: Path
) -> None:
    layout, tag, _ = image
    probe = (
        "import os, queuectl.controller.manager, queuectl.webhooks.server, queuectl.agent.nvml\n"
        "print('uid', os.getuid())\n"
        "try:\n    open('/opt/queuectl/x', 'w')\n"
        "except OSError as err:\n    print('ro', err.errno)\n"
    )
    rc, out = run_in_container(layout, tag, tmp_path / "b1", ["python", "-c", probe])
    assert rc == 0, out
    assert "uid 65532" in out
    assert "ro 30" in out  # EROFS


def test_queuectl_runs_from_the_image(image: tuple[Path, str, str], tmp_path: Path) -> None:
    layout, tag, _ = image
    rc, out = run_in_container(layout, tag, tmp_path / "b2", ["queuectl", "controller", "--help"])
    assert rc == 0, out
    assert "--leader-elect" in out
