"""A real node beside the kwok GPU nodes: a kubelet runs a pod from a locally loaded image.

Issue 13 item 2: the scenario a platform engineer's install needs. The image is loaded into
the node's containerd from an archive (no registry); the API server reaches the pod through
its Service's endpoints (webhooks take the same path); stopping the environment leaves no
process, mount, namespace, route or cgroup behind.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from queuectl.testenv import ControlPlane, eventually
from queuectl.testenv.build import ensure_binaries
from queuectl.testenv.nodebuild import ensure_node_binaries
from queuectl.testenv.nodeconfig import REAL_NODE_LABEL
from queuectl.testenv.ociarchive import single_binary_image
from queuectl.testenv.realnode import RealNode, load_image, recorded

pytestmark = [pytest.mark.cluster, pytest.mark.real_node]

WEB_IMAGE = "localhost/queuectl/web:v1"  # never on any registry: only a local load finds it


@pytest.fixture(scope="module")
def plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    work = tmp_path_factory.mktemp("realnode")
    cp = ControlPlane(work, name="realnode", binaries=ensure_binaries(), real_nodes=1)
    try:
        cp.start()
        cp.add_gpu_nodes(1, name_prefix="kwok")
        # A "local image": the test binary under a name no registry serves, loaded directly.
        archive = work / "images" / "web.tar"
        single_binary_image(ensure_node_binaries().path("pause"), WEB_IMAGE, "/web", archive)
        (node,) = recorded(work)
        load_image(node, archive)
        yield cp
    finally:
        cp.stop()


def web_pod(name: str) -> str:
    return json.dumps(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "labels": {"app": name}},
            "spec": {
                "nodeSelector": {REAL_NODE_LABEL: "true"},
                "containers": [
                    {
                        "name": "web",
                        "image": WEB_IMAGE,
                        "imagePullPolicy": "Never",
                        "args": ["serve", ":8080"],
                        "ports": [{"containerPort": 8080}],
                    }
                ],
            },
        }
    )


def web_service(name: str) -> str:
    return json.dumps(
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": name},
            "spec": {"selector": {"app": name}, "ports": [{"port": 80, "targetPort": 8080}]},
        }
    )


def pod_phase(plane: ControlPlane, name: str) -> str:
    return plane.kubectl("get", "pod", name, "-o", "jsonpath={.status.phase}").stdout


def leftovers(plane: ControlPlane, node: RealNode) -> dict[str, object]:
    mounts = Path("/proc/self/mounts").read_text()
    routes = subprocess.run(["ip", "route"], capture_output=True, text=True).stdout
    namespaces = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    state = Path(node.dir) / "runc" / "k8s.io"  # one entry per sandbox and container
    ids = [e.name for e in state.iterdir()] if state.is_dir() else []
    sockets = {
        hashlib.sha256(f"{node.containerd_socket}/k8s.io/{i}".encode()).hexdigest() for i in ids
    }
    shim_dir = Path("/run/containerd/s")
    return {
        "shim sockets": sorted(sockets & {p.name for p in shim_dir.iterdir()})
        if shim_dir.is_dir()
        else [],
        "mounts": [m for m in mounts.splitlines() if str(plane.work_dir) in m],
        "route": node.pod_cidr in routes,
        "netns": node.netns in namespaces,
        "cgroup": any(Path("/sys/fs/cgroup").glob(f"*/{node.cgroup}"))
        or Path("/sys/fs/cgroup", node.cgroup).exists(),
    }


def test_a_pod_from_a_locally_loaded_image_runs_on_the_real_node_and_is_reached_by_the_api_server(
    plane: ControlPlane,
) -> None:
    (node,) = recorded(plane.work_dir)
    nodes = plane.kubectl("get", "nodes", "-o", "name").stdout.split()
    assert sorted(nodes) == ["node/kwok-0", f"node/{node.name}"]

    plane.kubectl("apply", "-f", "-", input=web_pod("web"))
    plane.kubectl("apply", "-f", "-", input=web_service("web"))
    eventually(lambda: pod_phase(plane, "web"), lambda p: p == "Running", timeout=120, what="web")
    pod_ip = plane.kubectl("get", "pod", "web", "-o", "jsonpath={.status.podIP}").stdout
    assert pod_ip.startswith(node.pod_cidr.rsplit(".", 1)[0] + ".")

    # The API server dials the Service's endpoint (the pod IP in the node's namespace), as it
    # does for a webhook Service with --enable-aggregator-routing.
    answer = eventually(
        lambda: (
            plane.kubectl(
                "get", "--raw", "/api/v1/namespaces/default/services/web:80/proxy/", check=False
            ).stdout
        ),
        lambda out: out.startswith("ok"),
        timeout=60,
        what="the API server's answer from the pod through its Service",
    )
    assert answer == "ok web\n"
    # ...and the kubelet itself (logs), at the node's InternalIP.
    assert plane.kubectl("logs", "web").returncode == 0


def test_a_pod_on_the_real_node_reaches_the_api_server_through_the_kubernetes_service(
    plane: ControlPlane,
) -> None:
    """The in-cluster path (KUBERNETES_SERVICE_HOST = 10.96.0.1, kube-proxy on the node, the
    service-account CA and token) that the controller Deployment of issue 13 item 3 uses."""
    pod = json.loads(web_pod("incluster"))
    pod["spec"]["restartPolicy"] = "Never"
    pod["spec"]["containers"][0]["args"] = ["apiserver", "/api/v1/namespaces/default/pods"]
    plane.kubectl("apply", "-f", "-", input=json.dumps(pod))
    phase = eventually(
        lambda: pod_phase(plane, "incluster"),
        lambda p: p in ("Succeeded", "Failed"),
        timeout=120,
        what="the in-cluster client pod to finish",
    )
    logs = plane.kubectl("logs", "incluster").stdout
    # TLS verified against the cluster CA and the token authenticated: RBAC then says no,
    # because the default service account may not list pods.
    assert (phase, logs) == ("Succeeded", "HTTP 403\n")


def test_stopping_the_environment_leaves_nothing_of_the_node_behind(
    plane: ControlPlane,
) -> None:
    (node,) = recorded(plane.work_dir)
    plane.kubectl("apply", "-f", "-", input=web_pod("web2"))
    eventually(lambda: pod_phase(plane, "web2"), lambda p: p == "Running", timeout=120, what="web2")
    before = leftovers(plane, node)
    assert before["netns"] and before["route"] and before["mounts"], before
    assert before["shim sockets"], before

    plane.stop()

    assert leftovers(plane, node) == {
        "shim sockets": [],
        "mounts": [],
        "route": False,
        "netns": False,
        "cgroup": False,
    }
    assert recorded(plane.work_dir) == []
