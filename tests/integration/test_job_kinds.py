"""A second job kind on a real control plane: adding a kind is one class and one registration.

The controller starts with Widget (e2e/widget_kind.py) registered through --job-kind before the
Widget CRD exists: it logs that once, keeps running, and registers webhook rules for widgets
that the API server accepts. Once the CRD is installed the controller picks it up without a
restart, and a queued Widget is created suspended, gets a Workload with both its pod sets, is
admitted, and is unsuspended with the flavor's node affinity in both pod templates.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from e2e.harness import (
    WL,
    ControllerProcess,
    apply,
    get,
    is_true,
    items,
    one_queue,
    unregister_webhooks,
    wait_for,
)
from e2e.widget_kind import GROUP, Widget, crd, widget
from queuectl.api import names
from queuectl.jobs.podtemplate import AFFINITY_KEY
from queuectl.jobs.registry import KINDS
from queuectl.testenv.cluster import Cluster
from queuectl.testenv.nodes import H100
from queuectl.testenv.pytest_plugin import StandardFleet

REPO = Path(__file__).resolve().parents[2]
CRD_NAME = f"widgets.{GROUP}"


@pytest.fixture
def widget_controller(control_plane: Cluster, tmp_path: Path) -> Iterator[ControllerProcess]:
    """A controller that queues Widgets too, started while their CRD is not installed."""
    control_plane.kubectl("delete", "crd", CRD_NAME, "--ignore-not-found")
    proc = ControllerProcess(
        control_plane.kubeconfig,
        tmp_path,
        ["--job-kind", "e2e.widget_kind:Widget", "--job-kind-recheck-seconds", "1"],
    )
    with pytest.MonkeyPatch.context() as env:  # the controller imports e2e from the repo
        env.setenv("PYTHONPATH", os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]))
        proc.start()
    try:
        yield proc
    finally:
        proc.stop()
        unregister_webhooks(control_plane)
        control_plane.kubectl("delete", "crd", CRD_NAME, "--ignore-not-found", "--wait=false")


def test_the_registry_holds_one_entry_per_kind() -> None:
    resources = [kind.resource for kind in KINDS.values()]
    assert len({(r.group, r.kind) for r in resources}) == len(resources) == len(KINDS)
    assert KINDS.for_group_kind("batch", "Job") is KINDS["Job"]
    assert KINDS.with_kinds(Widget()).for_group_kind(GROUP, "Widget") is not None


def test_a_kind_installed_after_start_is_queued_end_to_end(
    control_plane: Cluster,
    namespace: str,
    gpu_nodes: StandardFleet,
    widget_controller: ControllerProcess,
) -> None:
    log = widget_controller.log_tail(200)
    assert log.count("job kind Widget (widgets.example.com/v1/widgets): not watched") == 1, log
    mutating = get(
        control_plane, "mutatingwebhookconfiguration", names.MUTATING_WEBHOOK_CONFIGURATION
    )
    rules = [r for hook in mutating["webhooks"] for r in hook["rules"]]
    assert any(r["apiGroups"] == [GROUP] and r["resources"] == ["widgets"] for r in rules), (
        "the API server keeps a webhook rule for a resource it does not serve yet"
    )

    apply(control_plane, crd())
    control_plane.kubectl("wait", "--for=condition=Established", f"crd/{CRD_NAME}", "--timeout=60s")
    wait_for(
        "the controller watching widgets",
        lambda: (
            "job kind Widget (widgets.example.com/v1): now served"
            in widget_controller.log_tail(400)
        ),
    )
    one_queue(control_plane, namespace, 16)
    queued = widget("w", namespace, "lq", workers=2, gpus=4)
    # what the webhooks make of it on create (a server-side dry run passes through them)
    dry = control_plane.kubectl(
        "create", "--dry-run=server", "-o", "json", "-f", "-", input=json.dumps(queued)
    )
    created = json.loads(dry.stdout)
    assert created["spec"]["suspend"] is True
    assert created["metadata"]["labels"][names.LABEL_CLUSTER_QUEUE] == f"cq-{namespace}"
    apply(control_plane, queued)

    def workload() -> dict[str, Any] | None:
        for wl in items(control_plane, WL, namespace):
            refs = wl["metadata"].get("ownerReferences") or []
            if any(r.get("kind") == "Widget" and r.get("name") == "w" for r in refs):
                return wl
        return None

    wl = wait_for("the Widget's Workload", workload)
    assert [(ps["name"], ps["count"]) for ps in wl["spec"]["podSets"]] == [
        ("leader", 1),
        ("workers", 2),
    ]
    wait_for("admitted", lambda: is_true(workload(), names.COND_ADMITTED))

    def unsuspended() -> dict[str, Any] | None:
        found = get(control_plane, "widget", "w", namespace)
        return found if found["spec"].get("suspend") is False else None

    running = wait_for("unsuspended", unsuspended)
    for template in ("leaderTemplate", "workerTemplate"):
        terms = running["spec"][template]["spec"]["affinity"]["nodeAffinity"][AFFINITY_KEY]
        expressions = terms["nodeSelectorTerms"][0]["matchExpressions"]
        assert {"key": names.LABEL_GPU_PRODUCT, "operator": "In", "values": [H100]} in expressions
