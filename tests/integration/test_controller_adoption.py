"""A Workload squatting a Job's Workload name is not adopted (issue 12, finding 10).

Set up before any controller runs, so the squatter is there first (as if it had won the race
after the Job's uid became visible): the controller must report it and leave the Job suspended
until the squatter is deleted, then give the Job a Workload of its own.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from e2e.harness import (
    WL,
    ControllerProcess,
    admitted,
    apply,
    get,
    gpu_job,
    one_queue,
    unregister_webhooks,
    wait_for,
)
from queuectl.api import names
from queuectl.jobs.batch import BatchJob
from queuectl.testenv.cluster import Cluster
from queuectl.testenv.pytest_plugin import StandardFleet

CRDS = Path(__file__).parents[2] / "queuectl" / "crds"


@pytest.fixture
def late_controller(control_plane: Cluster, tmp_path: Path) -> Iterator[ControllerProcess]:
    """A controller the test starts itself, once the scene is set."""
    proc = ControllerProcess(control_plane.kubeconfig, tmp_path)
    try:
        yield proc
    finally:
        proc.stop()
        unregister_webhooks(control_plane)


def events_for(cluster: Cluster, namespace: str, name: str) -> list[dict[str, Any]]:
    out = cluster.kubectl("get", "events.events.k8s.io", "-n", namespace, "-o", "json").stdout
    return [e for e in json.loads(out)["items"] if (e.get("regarding") or {}).get("name") == name]


def test_a_squatting_workload_is_reported_and_never_starts_the_job(
    control_plane: Cluster,
    namespace: str,
    gpu_nodes: StandardFleet,
    late_controller: ControllerProcess,
) -> None:
    control_plane.kubectl("apply", "--server-side", "--force-conflicts", "-f", str(CRDS))
    control_plane.kubectl("wait", "--for=condition=Established", "--timeout=60s", f"crd/{WL}")
    one_queue(control_plane, namespace, 8)
    job = gpu_job("train", namespace, "lq")
    job["spec"]["suspend"] = True  # no webhook yet: queued by hand, as the webhook would
    apply(control_plane, job)
    created = get(control_plane, "job", "train", namespace)
    squatter_name = BatchJob().workload_name(created)
    squatter = {
        "apiVersion": names.API_VERSION,
        "kind": "Workload",
        "metadata": {"name": squatter_name, "namespace": namespace},
        "spec": {
            "queueName": "lq",
            "podSets": [{"name": "main", "count": 1, "template": job["spec"]["template"]}],
        },
    }
    apply(control_plane, squatter)

    late_controller.start()
    (event,) = wait_for(
        "a ForeignWorkload event on the Job",
        lambda: [
            e
            for e in events_for(control_plane, namespace, "train")
            if e.get("reason") == names.EVENT_FOREIGN_WORKLOAD
        ],
    )
    assert "is not owned by it" in event["note"]

    # The squatter, a Workload of its own, may well be admitted: that must not start the Job.
    def squatter_admitted() -> bool:
        wl = get(control_plane, WL, squatter_name, namespace)
        conditions = (wl.get("status") or {}).get("conditions") or []
        return any(c["type"] == names.COND_ADMITTED and c["status"] == "True" for c in conditions)

    wait_for("the squatter admitted as a Workload of its own", squatter_admitted)
    job_now = get(control_plane, "job", "train", namespace)
    assert job_now["spec"]["suspend"] is True
    assert names.LABEL_WORKLOAD not in job_now["metadata"]["labels"]

    # Once the squatter is deleted, the Job gets a Workload of its own and starts.
    control_plane.kubectl("delete", WL, squatter_name, "-n", namespace)
    wait_for("train admitted", lambda: admitted(control_plane, namespace, "train"))
    wait_for(
        "train started",
        lambda: get(control_plane, "job", "train", namespace)["spec"].get("suspend") is False,
    )
