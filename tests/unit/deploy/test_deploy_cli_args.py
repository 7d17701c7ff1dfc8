"""Every container that runs the queuectl image passes arguments the queuectl CLI accepts.

The manifests and the CLI are written by different hands; parsing the rendered args with the real
parser catches a renamed or missing flag before a pod crash-loops on it.
"""

from __future__ import annotations

import contextlib
import io
from typing import Any

import pytest
from deploy_manifests import Obj

from queuectl.cli.main import build_parser

WORKLOAD_KINDS = ("Deployment", "DaemonSet")


def queuectl_containers(objects: list[Obj]) -> list[tuple[str, dict[str, Any]]]:
    found = []
    for obj in objects:
        if obj["kind"] in WORKLOAD_KINDS:
            for container in obj["spec"]["template"]["spec"]["containers"]:
                if container["image"].split("/")[-1].split(":")[0] == "queuectl":
                    found.append((f"{obj['kind']}/{obj['metadata']['name']}", container))
    return found


def test_the_controller_runs_from_the_queuectl_image(rendered: list[Obj]) -> None:
    assert "Deployment/queuectl-controller" in dict(queuectl_containers(rendered))


def test_every_queuectl_container_passes_arguments_the_cli_accepts(rendered: list[Obj]) -> None:
    parser, broken = build_parser()
    for where, container in queuectl_containers(rendered):
        args = [*container.get("command", [])[1:], *container.get("args", [])]
        command = args[0]
        assert command not in broken, f"{where}: `queuectl {command}` fails to load: {broken}"
        errors = io.StringIO()
        try:
            with contextlib.redirect_stderr(errors):
                parser.parse_args(args)
        except SystemExit:
            pytest.fail(f"{where}: queuectl {' '.join(args)}\n{errors.getvalue()}")
