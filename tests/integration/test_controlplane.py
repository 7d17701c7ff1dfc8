"""The local control plane is a real Kubernetes: scheduler, Job controller, CEL and webhooks work.

These are the acceptance scenarios of issue 2; every later integration test relies on them.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import ssl
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

from queuectl.api import names
from queuectl.testenv import A100, H100, Cluster, eventually
from queuectl.testenv.pki import CertificateAuthority
from queuectl.testenv.ports import free_ports
from queuectl.testenv.pytest_plugin import StandardFleet


def gpu_job(
    name: str, pod_spec_extra: dict[str, Any], annotations: dict[str, str]
) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name},
        "spec": {
            "backoffLimit": 0,
            "template": {
                "metadata": {"annotations": annotations},
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [
                        {
                            "name": "train",
                            "image": "registry.example/train:1",
                            "resources": {"limits": {names.GPU_RESOURCE: "2"}},
                        }
                    ],
                    **pod_spec_extra,
                },
            },
        },
    }


def job_pods(api: k8s.ApiClient, namespace: str, job: str) -> list[k8s.V1Pod]:
    pods = k8s.CoreV1Api(api).list_namespaced_pod(namespace, label_selector=f"job-name={job}")
    return list(pods.items)


def test_gpu_job_is_bound_to_a_matching_fake_node_and_succeeds(
    k8s_client: k8s.ApiClient, namespace: str, gpu_nodes: StandardFleet
) -> None:
    job = gpu_job(
        "a100-train",
        {"nodeSelector": {names.LABEL_GPU_PRODUCT: A100}},
        {names.ANNOTATION_TESTENV_SUCCEED_AFTER: "1s"},
    )
    k8s.BatchV1Api(k8s_client).create_namespaced_job(namespace, job)

    finished = eventually(
        lambda: k8s.BatchV1Api(k8s_client).read_namespaced_job_status("a100-train", namespace),
        lambda j: bool(j.status.succeeded),
        what="job a100-train succeeded",
    )
    assert finished.status.succeeded == 1
    (pod,) = job_pods(k8s_client, namespace, "a100-train")
    assert pod.spec.node_name in {n.name for n in gpu_nodes.a100}
    assert pod.status.phase == "Succeeded"


def test_job_with_unsatisfiable_node_affinity_stays_pending(
    k8s_client: k8s.ApiClient, namespace: str, gpu_nodes: StandardFleet
) -> None:
    affinity = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {
                        "matchExpressions": [
                            {
                                "key": names.LABEL_GPU_PRODUCT,
                                "operator": "In",
                                "values": ["NVIDIA-B200"],
                            }
                        ]
                    }
                ]
            }
        }
    }
    job = gpu_job("b200-train", {"affinity": affinity}, {})
    k8s.BatchV1Api(k8s_client).create_namespaced_job(namespace, job)

    def scheduled_condition() -> Any:
        pods = job_pods(k8s_client, namespace, "b200-train")
        conditions = (pods[0].status.conditions or []) if pods else []
        return next((c for c in conditions if c.type == "PodScheduled"), None)

    condition = eventually(scheduled_condition, what="the scheduler judged the pod")
    assert (condition.status, condition.reason) == ("False", "Unschedulable")
    (pod,) = job_pods(k8s_client, namespace, "b200-train")
    assert pod.status.phase == "Pending"
    assert pod.spec.node_name is None


def test_fake_pods_run_until_a_test_finishes_them_and_vanish_when_deleted(
    k8s_client: k8s.ApiClient, namespace: str, gpu_nodes: StandardFleet
) -> None:
    job = gpu_job("runner", {"nodeSelector": {names.LABEL_GPU_PRODUCT: H100}}, {})
    job["spec"].update({"parallelism": 2, "completions": 2})
    k8s.BatchV1Api(k8s_client).create_namespaced_job(namespace, job)
    core = k8s.CoreV1Api(k8s_client)
    running = eventually(
        lambda: job_pods(k8s_client, namespace, "runner"),
        lambda pods: len(pods) == 2 and all(p.status.phase == "Running" for p in pods),
        what="both pods Running",
    )
    finish = {
        running[0].metadata.name: (names.ANNOTATION_TESTENV_SUCCEED_AFTER, "Succeeded"),
        running[1].metadata.name: (names.ANNOTATION_TESTENV_FAIL_AFTER, "Failed"),
    }
    for pod, (annotation, _) in finish.items():
        core.patch_namespaced_pod(pod, namespace, {"metadata": {"annotations": {annotation: "0s"}}})
    phases = eventually(
        lambda: {
            p.metadata.name: p.status.phase for p in job_pods(k8s_client, namespace, "runner")
        },
        lambda seen: all(seen.get(pod) == phase for pod, (_, phase) in finish.items()),
        what="each pod ended as its annotation asked",
    )
    assert sorted(phases.values()) == ["Failed", "Succeeded"]

    k8s.BatchV1Api(k8s_client).delete_namespaced_job(
        "runner", namespace, propagation_policy="Background"
    )
    eventually(
        lambda: job_pods(k8s_client, namespace, "runner"),
        lambda pods: not pods,
        what="the deleted Job's pods are gone",
    )


@pytest.fixture
def range_crd(k8s_client: k8s.ApiClient) -> Iterator[tuple[str, str]]:
    """A throwaway CRD whose schema carries a CEL rule with a message."""
    plural = f"ranges{uuid.uuid4().hex[:6]}"
    group = "testenv.queuectl.io"
    crd = {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{group}"},
        "spec": {
            "group": group,
            "scope": "Namespaced",
            "names": {"plural": plural, "singular": plural[:-1], "kind": f"R{plural}"},
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "storage": True,
                    "schema": {
                        "openAPIV3Schema": {
                            "type": "object",
                            "properties": {
                                "spec": {
                                    "type": "object",
                                    "properties": {
                                        "min": {"type": "integer"},
                                        "max": {"type": "integer"},
                                    },
                                    "x-kubernetes-validations": [
                                        {
                                            "rule": "self.min <= self.max",
                                            "message": "min must not exceed max",
                                        }
                                    ],
                                }
                            },
                        }
                    },
                }
            ],
        },
    }
    ext = k8s.ApiextensionsV1Api(k8s_client)
    ext.create_custom_resource_definition(crd)  # type: ignore[arg-type]
    eventually(
        lambda: ext.read_custom_resource_definition_status(f"{plural}.{group}").status.conditions,
        lambda conds: any(c.type == "Established" and c.status == "True" for c in conds or []),
        what="the CRD is established",
    )
    yield group, plural
    ext.delete_custom_resource_definition(f"{plural}.{group}")


def test_crd_validation_rule_refuses_a_bad_object_with_its_message(
    k8s_client: k8s.ApiClient, namespace: str, range_crd: tuple[str, str]
) -> None:
    group, plural = range_crd
    custom = k8s.CustomObjectsApi(k8s_client)

    def create(name: str, low: int, high: int) -> Any:
        body = {
            "apiVersion": f"{group}/v1",
            "kind": f"R{plural}",
            "metadata": {"name": name},
            "spec": {"min": low, "max": high},
        }
        return custom.create_namespaced_custom_object(group, "v1", namespace, plural, body)

    assert create("good", 1, 2)["spec"] == {"min": 1, "max": 2}
    with pytest.raises(ApiException) as refused:
        create("bad", 3, 2)
    assert refused.value.status == 422
    assert "min must not exceed max" in str(refused.value.body)


# ---- admission webhooks served by this test process ---------------------------------------
@dataclass
class WebhookServer:
    """An aiohttp HTTPS server on 127.0.0.1 in a thread; records the reviews it answered."""

    url: str
    ca_pem: bytes
    reviews: list[dict[str, Any]] = field(default_factory=list)


REVIEWS = web.AppKey("reviews", list[dict[str, Any]])


async def _mutate(request: web.Request) -> web.Response:
    review = await request.json()
    request.app[REVIEWS].append(review)
    patch = [{"op": "add", "path": "/metadata/labels", "value": {"stamped-by": "test-webhook"}}]
    response = {
        "uid": review["request"]["uid"],
        "allowed": True,
        "patchType": "JSONPatch",
        "patch": base64.b64encode(json.dumps(patch).encode()).decode(),
    }
    return web.json_response({**_envelope(review), "response": response})


async def _validate(request: web.Request) -> web.Response:
    review = await request.json()
    request.app[REVIEWS].append(review)
    forbidden = "forbidden" in (review["request"]["object"].get("data") or {})
    response: dict[str, Any] = {"uid": review["request"]["uid"], "allowed": not forbidden}
    if forbidden:
        response["status"] = {"code": 403, "message": "the key 'forbidden' is not allowed here"}
    return web.json_response({**_envelope(review), "response": response})


def _envelope(review: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": review["apiVersion"], "kind": "AdmissionReview"}


@pytest.fixture
def webhook_server(tmp_path: Path) -> Iterator[WebhookServer]:
    ca = CertificateAuthority.create("test-webhook-ca")
    cert, key = ca.issue_server("test-webhook", ips=("127.0.0.1",)).write(tmp_path, "serving")
    tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    tls.load_cert_chain(str(cert), str(key))
    (port,) = free_ports(1)
    app = web.Application()
    reviews: list[dict[str, Any]] = []
    app[REVIEWS] = reviews
    app.router.add_post("/mutate", _mutate)
    app.router.add_post("/validate", _validate)
    loop = asyncio.new_event_loop()
    runner = web.AppRunner(app)

    async def start() -> None:
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", port, ssl_context=tls).start()

    loop.run_until_complete(start())
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    yield WebhookServer(f"https://127.0.0.1:{port}", ca.cert_pem, reviews)
    asyncio.run_coroutine_threadsafe(runner.cleanup(), loop).result(timeout=10)
    loop.call_soon_threadsafe(loop.stop)
    thread.join(timeout=10)


def _webhook(name: str, server: WebhookServer, path: str, namespace: str) -> dict[str, Any]:
    return {
        "name": name,
        "clientConfig": {
            "url": server.url + path,
            "caBundle": base64.b64encode(server.ca_pem).decode(),
        },
        "rules": [
            {
                "apiGroups": [""],
                "apiVersions": ["v1"],
                "operations": ["CREATE"],
                "resources": ["configmaps"],
            }
        ],
        "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}},
        "sideEffects": "None",
        "admissionReviewVersions": ["v1"],
        "failurePolicy": "Fail",
        "timeoutSeconds": 5,
    }


def test_api_server_calls_a_tls_webhook_on_loopback_and_obeys_it(
    control_plane: Cluster,
    k8s_client: k8s.ApiClient,
    namespace: str,
    webhook_server: WebhookServer,
) -> None:
    reg = k8s.AdmissionregistrationV1Api(k8s_client)
    config_name = f"testenv-{namespace}"
    mutating = {
        "metadata": {"name": config_name},
        "webhooks": [_webhook("stamp.testenv.queuectl.io", webhook_server, "/mutate", namespace)],
    }
    validating = {
        "metadata": {"name": config_name},
        "webhooks": [_webhook("deny.testenv.queuectl.io", webhook_server, "/validate", namespace)],
    }
    reg.create_mutating_webhook_configuration(mutating)  # type: ignore[arg-type]
    reg.create_validating_webhook_configuration(validating)  # type: ignore[arg-type]
    core = k8s.CoreV1Api(k8s_client)
    try:
        created = core.create_namespaced_config_map(
            namespace, {"metadata": {"name": "plain"}, "data": {"a": "1"}}
        )
        assert created.metadata.labels == {"stamped-by": "test-webhook"}
        with pytest.raises(ApiException) as refused:
            core.create_namespaced_config_map(
                namespace, {"metadata": {"name": "bad"}, "data": {"forbidden": "1"}}
            )
        assert "the key 'forbidden' is not allowed here" in str(refused.value.body)
        kinds = {
            (r["request"]["kind"]["kind"], r["request"]["name"]) for r in webhook_server.reviews
        }
        assert {("ConfigMap", "plain"), ("ConfigMap", "bad")} <= kinds
    finally:
        reg.delete_mutating_webhook_configuration(config_name)
        reg.delete_validating_webhook_configuration(config_name)


# ---- queuectl dev: the persistent environment a new user starts ---------------------------
def _queuectl(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "queuectl.cli.main", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        check=False,
    )


@pytest.mark.cluster
def test_dev_up_twice_says_up_and_down_stops_exactly_what_it_started(tmp_path: Path) -> None:
    env = dict(os.environ, QUEUECTL_STATE_DIR=str(tmp_path))
    bystander = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"])
    try:
        first = _queuectl("dev", "up", "--nodes", "2", "--gpus-per-node", "4", env=env)
        assert first.returncode == 0, first.stderr
        kubeconfig_path = tmp_path / "default" / "kubeconfig"
        assert f"export KUBECONFIG={kubeconfig_path}" in first.stdout

        again = _queuectl("dev", "up", env=env)
        assert again.returncode == 0 and "already up" in again.stdout, again

        cluster = Cluster(kubeconfig_path)
        nodes = json.loads(cluster.kubectl("get", "nodes", "-o", "json").stdout)["items"]
        assert [n["status"]["allocatable"][names.GPU_RESOURCE] for n in nodes] == ["4", "4"], nodes
        assert _queuectl("dev", "kubeconfig", env=env).stdout.strip() == str(kubeconfig_path)
        status = _queuectl("dev", "status", env=env)
        assert status.returncode == 0, status

        records = json.loads((tmp_path / "default" / "processes.json").read_text())
        pids = [r["pid"] for r in records]
        down = _queuectl("dev", "down", env=env)
        assert down.returncode == 0 and "Stopped" in down.stdout, down
        assert not [pid for pid in pids if Path(f"/proc/{pid}").exists() and _not_zombie(pid)]
        assert bystander.poll() is None, "dev down touched a process it did not start"
        assert _queuectl("dev", "status", env=env).returncode == 3
    finally:
        _queuectl("dev", "down", env=env)
        bystander.kill()
        bystander.wait()


def _not_zombie(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rindex(")") + 2] != "Z"
