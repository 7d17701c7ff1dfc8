"""The install a platform engineer runs, on the real node: issue 13 item 3, first step.

`make image`'s image is loaded into the real node (no registry), the kustomize base is applied
unchanged but for the image name and a nodeSelector onto the real node, and then: both
controller replicas run and are Ready there, one holds the Lease, the API server reaches the
webhooks through their Service (a queued Job is suspended by the mutating webhook), and the
metrics answer through their Service. The image comes from `testenv.image.ensure_image` (built
once by deploy/image/build.sh, ~4 min as root, and cached by the hash of its inputs).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from queuectl.testenv import ControlPlane, eventually
from queuectl.testenv.realinstall import NAMESPACE as NS
from queuectl.testenv.realinstall import RealInstall, real_install

pytestmark = [pytest.mark.cluster, pytest.mark.real_node]


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    with real_install(tmp_path_factory.mktemp("install")) as install:
        yield install.plane


def ready_replicas(plane: ControlPlane) -> list[tuple[str, str, str]]:
    pods = RealInstall(plane, Path()).controller_pods()
    return sorted(
        (
            p["metadata"]["name"],
            p["spec"].get("nodeName", ""),
            next(
                (c["status"] for c in p["status"].get("conditions", []) if c["type"] == "Ready"),
                "",
            ),
        )
        for p in pods
    )


def test_both_replicas_run_on_the_real_node_and_one_holds_the_lease(
    installed: ControlPlane,
) -> None:
    replicas = eventually(
        lambda: ready_replicas(installed),
        lambda rs: len(rs) == 2 and all(r[1:] == ("real-0", "True") for r in rs),
        timeout=180,
        what="2 Ready controller replicas on real-0",
    )
    holder = eventually(
        lambda: (
            installed.kubectl(
                "get",
                "lease",
                "queuectl-controller",
                "-n",
                NS,
                "-o",
                "jsonpath={.spec.holderIdentity}",
                check=False,
            ).stdout
        ),
        lambda h: bool(h),
        timeout=60,
        what="a Lease holder",
    )
    assert holder in {name for name, _, _ in replicas}


def test_the_api_server_reaches_the_webhooks_and_metrics_through_their_services(
    installed: ControlPlane,
) -> None:
    eventually(
        lambda: ready_replicas(installed),
        lambda rs: len(rs) == 2 and all(r[2] == "True" for r in rs),
        timeout=180,
        what="2 Ready controller replicas",
    )
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "queued", "labels": {"queuectl.io/queue-name": "team-a"}},
        "spec": {
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [
                        {
                            "name": "c",
                            "image": "x",
                            "resources": {"limits": {"nvidia.com/gpu": "1"}},
                        }
                    ],
                }
            }
        },
    }
    created = installed.kubectl("create", "-f", "-", input=json.dumps(job))
    # failurePolicy: Fail: had the API server not reached the webhook, the create would fail.
    assert "LocalQueue default/team-a does not exist" in created.stderr
    suspended = installed.kubectl("get", "job", "queued", "-o", "jsonpath={.spec.suspend}")
    assert suspended.stdout == "true"
    metrics = installed.kubectl(
        "get",
        "--raw",
        f"/api/v1/namespaces/{NS}/services/queuectl-controller-metrics:8080/proxy/metrics",
    ).stdout
    assert "queuectl_pending_workloads" in metrics
