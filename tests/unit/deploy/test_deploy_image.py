"""The Dockerfile builds a slim, non-root image whose user the Deployment agrees with.

No Docker daemon is needed: the Dockerfile is read as text, instruction by instruction.
"""

from __future__ import annotations

import json
import re

from deploy_manifests import REPO, Obj, one

DOCKERFILE = REPO / "Dockerfile"
DOCKERIGNORE = REPO / ".dockerignore"


def instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) pairs, continuation lines joined and comments dropped."""
    text = re.sub(r"\\\n", " ", DOCKERFILE.read_text())
    pairs = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            word, _, rest = line.partition(" ")
            pairs.append((word.upper(), rest.strip()))
    return pairs


def last(instruction: str) -> str:
    found = [args for word, args in instructions() if word == instruction]
    assert found, f"no {instruction} in the Dockerfile"
    return found[-1]


def test_the_image_is_based_on_python_3_11_slim_pinned_by_digest() -> None:
    args = {k: v for k, _, v in (a.partition("=") for w, a in instructions() if w == "ARG")}
    bases = [a.split()[0] for w, a in instructions() if w == "FROM"]
    resolved = {args.get(b[2:-1], b) if b.startswith("${") else b for b in bases}
    assert len(resolved) == 1, resolved
    assert re.fullmatch(r"python:3\.11\.\d+-slim-bookworm@sha256:[0-9a-f]{64}", resolved.pop())


def test_dependencies_install_from_the_lock_with_hashes_before_the_source_is_copied() -> None:
    steps = instructions()
    lock = next(i for i, (w, a) in enumerate(steps) if w == "COPY" and "requirements.lock" in a)
    source = next(i for i, (w, a) in enumerate(steps) if w == "COPY" and a.startswith("queuectl"))
    install = next(i for i, (w, a) in enumerate(steps) if w == "RUN" and "--require-hashes" in a)
    assert lock < install < source, "lock, locked install, then the source (layers cache)"


def test_the_image_runs_as_the_non_root_user_the_deployment_expects(base: list[Obj]) -> None:
    user, _, group = last("USER").partition(":")
    assert user.isdigit() and int(user) > 0, "USER must be numeric for runAsNonRoot"
    pod = one(base, "Deployment")["spec"]["template"]["spec"]["securityContext"]
    assert pod["runAsUser"] == int(user)
    assert pod["runAsGroup"] == int(group or user)


def test_the_image_runs_the_queuectl_command() -> None:
    assert json.loads(last("ENTRYPOINT")) == ["queuectl"]
    assert json.loads(last("CMD")) == ["controller"]


def test_every_file_the_build_copies_exists_and_is_not_ignored() -> None:
    ignored = DOCKERIGNORE.read_text()
    for word, args in instructions():
        if word != "COPY" or args.startswith("--from"):
            continue
        *sources, _dest = args.split()
        for source in sources:
            assert (REPO / source).exists(), f"COPY {source}: missing from the repository"
            assert f"!{source}" in ignored or f"!{source}/" in ignored, f"{source} is dockerignored"


def test_the_build_context_leaves_out_local_state() -> None:
    lines = [ln.strip() for ln in DOCKERIGNORE.read_text().splitlines()]
    assert "**" in lines, ".dockerignore must exclude everything, then re-include what is needed"
    reincluded = {ln[1:].rstrip("/") for ln in lines if ln.startswith("!")}
    assert reincluded == {
        "deploy/image/requirements.lock",
        "pyproject.toml",
        "README.md",
        "queuectl",
    }
