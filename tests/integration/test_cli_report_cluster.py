"""`queuectl report` against the real API server: two teams' Workloads, one running and one
finished after an earlier preemption, on a flavor priced at 2.50 USD per GPU-hour; the report
gives each team its GPU-hours and cost, clipped to the window asked for.

The Workloads' statuses are written directly, as the controller would, with transition times
in the past; no LocalQueue exists, so a controller running meanwhile leaves them alone.
"""

from __future__ import annotations

import csv
import io
import json
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
from kubernetes import client as k8s

from queuectl.api import names
from queuectl.cli.main import main
from queuectl.crds import load as load_crds
from queuectl.testenv import eventually
from queuectl.testenv.cluster import Cluster

GROUP, VERSION = names.GROUP, names.VERSION
GPU = names.GPU_RESOURCE
H = 3600.0
SUFFIX = uuid.uuid4().hex[:5]
FLAVOR = f"priced-h100-{SUFFIX}"
MANAGER = "queuectl-report-tests"


def _ts(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _established(api: k8s.ApiClient) -> bool:
    ext = k8s.ApiextensionsV1Api(api)
    for crd in load_crds():
        conds = ext.read_custom_resource_definition(crd["metadata"]["name"]).status.conditions
        if not any(c.type == "Established" and c.status == "True" for c in conds or []):
            return False
    return True


@pytest.fixture(scope="module")
def teams(control_plane: Cluster, k8s_client: k8s.ApiClient) -> Iterator[tuple[str, str]]:
    """Namespaces team-a and team-b (suffixed), the priced flavor, and their Workloads:
    team-a: 1 x 8 GPUs admitted 2 h ago, still running;
    team-b: 2 x 2 GPUs admitted 4 h ago, finished 1 h ago, after 30 min admitted earlier
    (preempted 5 h ago)."""
    ext = k8s.ApiextensionsV1Api(k8s_client)
    for crd in load_crds():
        ext.patch_custom_resource_definition(
            crd["metadata"]["name"], crd, field_manager=MANAGER, force=True,
            _content_type="application/apply-patch+yaml",
        )  # fmt: skip
    eventually(lambda: _established(k8s_client), what="CRDs Established", timeout=30)
    custom = k8s.CustomObjectsApi(k8s_client)
    core = k8s.CoreV1Api(k8s_client)
    custom.create_cluster_custom_object(
        GROUP, VERSION, "resourceflavors",
        {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": "ResourceFlavor",
            "metadata": {"name": FLAVOR},
            "spec": {"cost": {"gpuHourPrice": "2.50", "currency": "USD"}},
        },
    )  # fmt: skip
    a, b = f"team-a-{SUFFIX}", f"team-b-{SUFFIX}"
    for ns in (a, b):
        core.create_namespace({"metadata": {"name": ns}})  # type: ignore[arg-type]
    now = time.time()
    workload(custom, a, "train", pods=1, gpus=8, admitted=now - 2 * H)
    workload(
        custom, b, "sweep", pods=2, gpus=2, admitted=now - 4 * H, finished=now - H,
        past=1800, evicted=now - 5 * H,
    )  # fmt: skip
    yield a, b
    for ns in (a, b):
        core.delete_namespace(ns, propagation_policy="Background")
    custom.delete_cluster_custom_object(GROUP, VERSION, "resourceflavors", FLAVOR)


def workload(
    custom: k8s.CustomObjectsApi,
    ns: str,
    name: str,
    *,
    pods: int,
    gpus: int,
    admitted: float,
    finished: float | None = None,
    past: int = 0,
    evicted: float | None = None,
) -> None:
    container = {"name": "c", "image": "busybox", "resources": {"limits": {GPU: gpus}}}
    body = {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "Workload",
        "metadata": {"name": name},
        "spec": {
            "queueName": "nowhere",
            "podSets": [
                {"name": "main", "count": pods, "template": {"spec": {"containers": [container]}}}
            ],
        },
    }
    custom.create_namespaced_custom_object(GROUP, VERSION, ns, "workloads", body)

    def cond(type_: str, status: str, at: float) -> dict[str, Any]:
        return {"type": type_, "status": status, "reason": type_, "message": "set by the test",
                "lastTransitionTime": _ts(at)}  # fmt: skip

    conds = [cond(names.COND_QUOTA_RESERVED, "True", admitted),
             cond(names.COND_ADMITTED, "True", admitted)]  # fmt: skip
    if finished is not None:
        conds.append(cond(names.COND_FINISHED, "True", finished))
    if evicted is not None:
        conds.append(cond(names.COND_EVICTED, "False", evicted))
    status: dict[str, Any] = {
        "admission": {
            "clusterQueue": f"cq-{ns}",
            "podSetAssignments": [
                {
                    "name": "main",
                    "count": pods,
                    "flavors": {GPU: FLAVOR},
                    "resourceUsage": {GPU: gpus * pods},
                }
            ],
        },
        "conditions": conds,
    }
    if past:
        status["accumulatedPastExecutionTimeSeconds"] = past
    custom.patch_namespaced_custom_object_status(
        GROUP, VERSION, ns, "workloads", name, {"status": status}
    )


def cli(kubeconfig: str, *argv: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    capsys.readouterr()
    rc = main([*argv, "--kubeconfig", kubeconfig])
    out, err = capsys.readouterr()
    return rc, out, err


def test_each_team_is_charged_its_gpu_hours_at_the_flavors_price(
    teams: tuple[str, str], kubeconfig: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """A day's window holds everything: team-a 8 x 2 h = 16 GPU-hours (40 USD); team-b
    4 x 3 h + 4 x 0.5 h = 14 GPU-hours (35 USD)."""
    a, b = teams
    rc, out, err = cli(kubeconfig, "report", "--since", "1d", "-o", "json", capsys=capsys)
    assert rc == 0, err
    rows = {r["namespace"]: r for r in json.loads(out)["rows"]}
    assert rows[a]["gpuHours"] == pytest.approx(16.0, abs=0.1)
    assert rows[a]["cost"] == pytest.approx(40.0, abs=0.25)
    assert rows[b] == {"namespace": b, "gpuHours": 14.0, "cost": 35.0, "currency": "USD"}

    rc, out, err = cli(kubeconfig, "report", "--since", "1d", "--by", "wl", "-o", "csv",
                       "-n", b, capsys=capsys)  # fmt: skip
    assert rc == 0, err
    assert list(csv.reader(io.StringIO(out))) == [
        ["workload", "gpu_hours", "cost", "currency"],
        [f"{b}/sweep", "14.0000", "35.0000", "USD"],
    ]


def test_a_short_window_clips_what_ran_before_it(
    teams: tuple[str, str], kubeconfig: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """90 minutes: team-a's last 1.5 h (12 GPU-hours); team-b's last half hour before it
    finished (2 GPU-hours), nothing of its earlier admission."""
    a, b = teams
    rc, out, err = cli(kubeconfig, "report", "--since", "90m", "-o", "json", capsys=capsys)
    assert rc == 0, err
    rows = {r["namespace"]: r for r in json.loads(out)["rows"]}
    assert rows[a]["gpuHours"] == pytest.approx(12.0, abs=0.1)
    assert rows[b]["gpuHours"] == pytest.approx(2.0, abs=0.1)
    assert rows[b]["cost"] == pytest.approx(5.0, abs=0.25)


def test_describe_shows_the_finished_workloads_gpu_hours_and_cost(
    teams: tuple[str, str], kubeconfig: str, capsys: pytest.CaptureFixture[str]
) -> None:
    _, b = teams
    rc, out, err = cli(kubeconfig, "describe", "wl", "sweep", "-n", b, capsys=capsys)
    assert rc == 0, err
    assert f"14.00 GPU-hours so far (14.00 on {FLAVOR}); cost 35.00 USD" in out
