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
import os
import tarfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from queuectl.testenv import ControlPlane, eventually
from queuectl.testenv.build import ensure_binaries
from queuectl.testenv.image import ensure_image
from queuectl.testenv.nodeconfig import REAL_NODE_LABEL
from queuectl.testenv.realnode import load_image, recorded

pytestmark = [pytest.mark.cluster, pytest.mark.real_node]

REPO = Path(__file__).resolve().parents[2]
IMAGE = "localhost/queuectl/queuectl"
NS = "queuectl-system"


def oci_layout(work: Path) -> Path:
    return ensure_image().path


def overlay(work: Path, tag: str) -> Path:
    """The base as shipped, with the local image and the controller on the real node."""
    directory = work / "overlay"
    directory.mkdir()
    base = os.path.relpath(REPO / "deploy" / "kustomize" / "base", directory)
    patch = [
        {
            "op": "add",
            "path": "/spec/template/spec/nodeSelector",
            "value": {REAL_NODE_LABEL: "true"},
        },
        {
            "op": "replace",
            "path": "/spec/template/spec/containers/0/imagePullPolicy",
            "value": "Never",
        },
    ]
    kustomization = {
        "apiVersion": "kustomize.config.k8s.io/v1beta1",
        "kind": "Kustomization",
        "resources": [base],
        "images": [{"name": "queuectl", "newName": IMAGE, "newTag": tag}],
        "patches": [
            {
                "target": {"kind": "Deployment", "name": "queuectl-controller"},
                "patch": json.dumps(patch),
            }
        ],
    }
    (directory / "kustomization.yaml").write_text(json.dumps(kustomization))
    return directory


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    work = tmp_path_factory.mktemp("install")
    layout = oci_layout(work)
    [manifest] = json.loads((layout / "index.json").read_text())["manifests"]
    tag = manifest["annotations"]["org.opencontainers.image.ref.name"]
    archive = work / "image.tar"
    with tarfile.open(archive, "w") as tar:
        for entry in sorted(layout.iterdir()):
            tar.add(entry, arcname=entry.name)
    cp = ControlPlane(work / "cluster", name="install", binaries=ensure_binaries(), real_nodes=1)
    try:
        cp.start()
        cp.add_gpu_nodes(2)  # GPU nodes next to it, as in any queuectl cluster
        (node,) = recorded(cp.work_dir)
        load_image(node, archive, IMAGE)
        cp.kubectl("apply", "--server-side", "-k", str(overlay(work, tag)), timeout=300)
        yield cp
    finally:
        cp.stop()


def ready_replicas(plane: ControlPlane) -> list[tuple[str, str, str]]:
    out = plane.kubectl(
        "get", "pods", "-n", NS, "-l", "app.kubernetes.io/component=controller", "-o", "json"
    ).stdout
    return sorted(
        (
            p["metadata"]["name"],
            p["spec"].get("nodeName", ""),
            next(
                (c["status"] for c in p["status"].get("conditions", []) if c["type"] == "Ready"),
                "",
            ),
        )
        for p in json.loads(out)["items"]
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
