"""What the visibility API's e2e modules share: its path, the user roles, a controller that
registers the APIService pointing at itself, and whether the aggregator has it Available."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from pathlib import Path

from e2e.harness import ControllerProcess, running_controller
from queuectl.api import names
from queuectl.testenv.cluster import Cluster

ROLES = Path(__file__).parent.parent / "deploy" / "kustomize" / "base" / "rbac" / "user_roles.yaml"
API = f"/apis/{names.VISIBILITY_GROUP}/{names.VISIBILITY_VERSION}"


@contextlib.contextmanager
def visibility_controller(cluster: Cluster, log_dir: Path) -> Iterator[ControllerProcess]:
    """A controller that registers the visibility APIService; the APIService is deleted after
    (a crashed controller could not remove it itself)."""
    try:
        with running_controller(cluster, log_dir, ["--register-visibility"]) as proc:
            yield proc
    finally:
        cluster.kubectl(
            "delete", "--ignore-not-found", f"apiservice/{names.VISIBILITY_API_SERVICE}"
        )


def available(cluster: Cluster) -> bool:
    """The aggregator has the visibility APIService Available (it reaches the controller)."""
    got = cluster.kubectl(
        "get", "apiservice", names.VISIBILITY_API_SERVICE, "-o", "json", check=False
    )
    if got.returncode != 0:
        return False
    conds = json.loads(got.stdout).get("status", {}).get("conditions") or []
    return any(c["type"] == "Available" and c["status"] == "True" for c in conds)
