"""The real API server calls our webhooks over TLS and obeys them.

The server runs in this test process on 127.0.0.1 with certificates the CertManager made and
injected (caBundle) into configurations registered with `url:` client configs. The configurations
are narrowed to the test's namespace, so nothing else in the session is affected, and deleted after.
The lookup is in memory: these tests are about the webhook path, not the controller's cache.
"""

from __future__ import annotations

import asyncio
import ssl
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from cryptography import x509
from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException
from kubernetes_asyncio import config as async_config

from queuectl.api import names
from queuectl.testenv.cluster import Cluster
from queuectl.webhooks import configs
from queuectl.webhooks.certmanager import CertManager
from queuectl.webhooks.configs import UrlClient, render_webhook_configurations
from queuectl.webhooks.lookup import InMemoryLookup
from queuectl.webhooks.server import bound_port, start_webhook_server

CRDS = Path(__file__).parents[2] / "queuectl" / "crds"


async def call(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """Run a blocking client call off the loop: the API server calls back into this loop."""
    return await asyncio.to_thread(fn, *args, **kwargs)


@dataclass
class Webhooks:
    namespace: str
    lookup: InMemoryLookup
    manager: CertManager
    port: int
    batch: k8s.BatchV1Api


def only(namespace: str, config: dict[str, Any]) -> dict[str, Any]:
    """Narrow every webhook of a configuration to one namespace, under a unique name."""
    config["metadata"]["name"] = f"{config['metadata']['name']}-{namespace}"
    for hook in config["webhooks"]:
        hook["namespaceSelector"] = {"matchLabels": {"kubernetes.io/metadata.name": namespace}}
    return config


def labelled_job(name: str, labels: dict[str, str] | None) -> dict[str, Any]:
    container = {"name": "main", "image": "busybox", "command": ["true"]}
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, **({"labels": labels} if labels is not None else {})},
        "spec": {"template": {"spec": {"restartPolicy": "Never", "containers": [container]}}},
    }


async def wait_until_called(batch: k8s.BatchV1Api, namespace: str, timeout: float = 30) -> None:
    """The API server picks up new configurations asynchronously; dry-run until it mutates."""
    deadline = time.monotonic() + timeout
    probe = labelled_job("probe", {names.LABEL_QUEUE_NAME: "gpu"})
    while True:
        try:
            job = await call(batch.create_namespaced_job, namespace, probe, dry_run="All")
            if job.spec.suspend:
                return
        except ApiException as exc:  # e.g. the caBundle not yet seen: TLS failure, Fail policy
            last = exc.reason
        else:
            last = "not mutated yet"
        if time.monotonic() > deadline:
            raise AssertionError(f"the API server never called the webhook: {last}")
        await asyncio.sleep(0.3)


@pytest.fixture
async def webhooks(
    control_plane: Cluster, k8s_client: k8s.ApiClient, namespace: str, tmp_path: Path
) -> AsyncIterator[Webhooks]:
    admission = k8s.AdmissionregistrationV1Api(k8s_client)
    crd = CRDS / "localqueues.queuectl.io.yaml"
    await call(control_plane.kubectl, "apply", "--server-side", "--force-conflicts", "-f", str(crd))
    await call(
        control_plane.kubectl,
        "wait",
        "--for=condition=Established",
        "crd/localqueues.queuectl.io",
        "--timeout=60s",
    )
    lookup = InMemoryLookup(
        local_queues={(namespace, "gpu"): "cq-a"},
        cluster_queues={"cq-a": {"matchLabels": {"team": "a"}}},
    )
    # Certificates first exist only in the manager's plan; the server needs files to start.
    api = await async_config.new_client_from_config(config_file=control_plane.kubeconfig)
    mutating, validating = render_webhook_configurations(UrlClient("https://127.0.0.1:1"))
    mutating, validating = only(namespace, mutating), only(namespace, validating)
    manager = CertManager(
        api,
        tmp_path / "certs",
        namespace=namespace,
        mutating_configurations=[mutating["metadata"]["name"]],
        validating_configurations=[validating["metadata"]["name"]],
    )
    await manager.ensure()  # configurations do not exist yet: files and Secret only
    runner = await start_webhook_server("127.0.0.1", 0, tmp_path / "certs", lookup)
    port = bound_port(runner)
    for config in (mutating, validating):
        for hook in config["webhooks"]:
            hook["clientConfig"]["url"] = hook["clientConfig"]["url"].replace(
                "https://127.0.0.1:1/", f"https://127.0.0.1:{port}/"
            )
    await call(admission.create_mutating_webhook_configuration, mutating)
    await call(admission.create_validating_webhook_configuration, validating)
    batch = k8s.BatchV1Api(k8s_client)
    try:
        await manager.ensure()  # injects the caBundle into the configurations just created
        await wait_until_called(batch, namespace)
        yield Webhooks(namespace, lookup, manager, port, batch)
    finally:
        await call(admission.delete_mutating_webhook_configuration, mutating["metadata"]["name"])
        await call(
            admission.delete_validating_webhook_configuration, validating["metadata"]["name"]
        )
        await runner.cleanup()
        await api.close()


async def test_ca_bundle_is_injected_into_every_webhook(
    webhooks: Webhooks, k8s_client: k8s.ApiClient
) -> None:
    admission = k8s.AdmissionregistrationV1Api(k8s_client)
    name = f"{names.MUTATING_WEBHOOK_CONFIGURATION}-{webhooks.namespace}"
    config = await call(admission.read_mutating_webhook_configuration, name)
    secret = await call(
        k8s.CoreV1Api(k8s_client).read_namespaced_secret,
        names.WEBHOOK_CERT_SECRET,
        webhooks.namespace,
    )
    assert {hook.client_config.ca_bundle for hook in config.webhooks} == {secret.data["ca.crt"]}


async def test_a_labelled_job_is_created_suspended_and_labelled(webhooks: Webhooks) -> None:
    created = await call(
        webhooks.batch.create_namespaced_job,
        webhooks.namespace,
        labelled_job("train", {names.LABEL_QUEUE_NAME: "gpu"}),
    )
    assert created.spec.suspend is True
    assert created.metadata.labels == {
        names.LABEL_QUEUE_NAME: "gpu",
        names.LABEL_CLUSTER_QUEUE: "cq-a",
    }


async def test_an_unlabelled_job_joins_the_default_queue(webhooks: Webhooks) -> None:
    webhooks.lookup.local_queues[(webhooks.namespace, names.DEFAULT_LOCAL_QUEUE)] = "cq-default"
    created = await call(
        webhooks.batch.create_namespaced_job, webhooks.namespace, labelled_job("plain", None)
    )
    assert created.spec.suspend is True
    assert created.metadata.labels[names.LABEL_QUEUE_NAME] == names.DEFAULT_LOCAL_QUEUE
    assert created.metadata.labels[names.LABEL_CLUSTER_QUEUE] == "cq-default"


async def test_unsuspending_an_unadmitted_job_is_refused_until_it_is_admitted(
    webhooks: Webhooks,
) -> None:
    ns = webhooks.namespace
    job = labelled_job("train", {names.LABEL_QUEUE_NAME: "gpu"})
    await call(webhooks.batch.create_namespaced_job, ns, job)
    unsuspend = {"spec": {"suspend": False}}
    with pytest.raises(ApiException) as refused:
        await call(webhooks.batch.patch_namespaced_job, "train", ns, unsuspend)
    assert refused.value.status == 403
    assert (
        f"Job {ns}/train: it is queued in LocalQueue 'gpu' and not admitted yet, so it cannot be "
        "unsuspended by hand" in str(refused.value.body)
    )
    assert configs.VALIDATE_QUEUED_JOB in str(refused.value.body)

    webhooks.lookup.admitted_jobs.add((ns, "train"))
    patched = await call(webhooks.batch.patch_namespaced_job, "train", ns, unsuspend)
    assert patched.spec.suspend is False

    with pytest.raises(ApiException) as relabel:
        await call(
            webhooks.batch.patch_namespaced_job,
            "train",
            ns,
            {"metadata": {"labels": {names.LABEL_QUEUE_NAME: "other"}}},
        )
    assert "cannot change from 'gpu' to 'other' while the Job is admitted" in str(
        relabel.value.body
    )


async def test_a_pod_template_cannot_claim_its_gpus_are_served_by_another_device(
    webhooks: Webhooks,
) -> None:
    """4 pods of 8 GPUs and 1 RDMA device, the template claiming the RDMA device stands in for
    nvidia.com/gpu: the charge would read 1 GPU a pod. Refused on create and on update."""
    ns, rdma = webhooks.namespace, "rdma/hca"
    job = labelled_job("rdma", {names.LABEL_QUEUE_NAME: "gpu"})
    job["spec"] |= {"parallelism": 4, "completions": 4}
    per_pod = {names.GPU_RESOURCE: "8", rdma: "1"}
    job["spec"]["template"]["spec"]["containers"][0]["resources"] = {
        "requests": per_pod,
        "limits": per_pod,
    }
    claim = {"metadata": {"annotations": {names.ANNOTATION_GPU_RESOURCE: rdma}}}
    forged = {**job, "spec": {**job["spec"], "template": {**job["spec"]["template"], **claim}}}
    with pytest.raises(ApiException) as refused:
        await call(webhooks.batch.create_namespaced_job, ns, forged)
    assert refused.value.status == 403
    assert f"annotation {names.ANNOTATION_GPU_RESOURCE}" in str(refused.value.body)

    await call(webhooks.batch.create_namespaced_job, ns, job)  # waiting in its queue
    with pytest.raises(ApiException) as patched:
        await call(webhooks.batch.patch_namespaced_job, "rdma", ns, {"spec": {"template": claim}})
    assert patched.value.status == 403
    assert f"annotation {names.ANNOTATION_GPU_RESOURCE}" in str(patched.value.body)

    # Without the queue label the Job is sent too (the owned-keys webhook's CEL matchConditions):
    # a key of ours in its template is refused, a Job without one is not intercepted.
    unlabelled = labelled_job("rdma-unqueued", None)
    unlabelled["spec"]["template"] |= claim
    with pytest.raises(ApiException) as unqueued:
        await call(webhooks.batch.create_namespaced_job, ns, unlabelled)
    assert unqueued.value.status == 403
    assert configs.VALIDATE_OWNED_KEYS_JOB in str(unqueued.value.body)
    plain = await call(
        webhooks.batch.create_namespaced_job, ns, labelled_job("plain", None), dry_run="All"
    )
    assert plain.metadata.name == "plain"


async def test_a_local_queue_outside_the_cluster_queue_selector_is_refused(
    webhooks: Webhooks, k8s_client: k8s.ApiClient
) -> None:
    custom = k8s.CustomObjectsApi(k8s_client)
    body = {
        "apiVersion": names.API_VERSION,
        "kind": "LocalQueue",
        "metadata": {"name": "gpu"},
        "spec": {"clusterQueue": "cq-a"},
    }
    with pytest.raises(ApiException) as refused:
        await call(
            custom.create_namespaced_custom_object,
            names.GROUP,
            names.VERSION,
            webhooks.namespace,
            "localqueues",
            body,
        )
    assert f"ClusterQueue 'cq-a' does not accept work from namespace '{webhooks.namespace}'" in (
        str(refused.value.body)
    )


async def served_serial(port: int, ca_pem: bytes) -> int:
    trust = ssl.create_default_context(cadata=ca_pem.decode())
    _, writer = await asyncio.open_connection("127.0.0.1", port, ssl=trust)
    der = writer.get_extra_info("ssl_object").getpeercert(binary_form=True)
    writer.close()
    await writer.wait_closed()
    return x509.load_der_x509_certificate(der).serial_number


async def test_a_rotated_certificate_is_served_and_trusted_without_restart(
    webhooks: Webhooks,
) -> None:
    before = await webhooks.manager.ensure()
    # A new name to serve forces a new serving certificate now; a future clock would make one the
    # API server rightly refuses as not yet valid (time-based rotation is unit-tested).
    webhooks.manager.dns_names.append("webhook.example.test")
    after = await webhooks.manager.ensure()
    assert after.ca == before.ca and after.serving != before.serving
    await asyncio.sleep(1.1)  # the server checks the files at most once a second
    assert await served_serial(webhooks.port, after.ca.cert_pem) == after.serving.cert.serial_number
    created = await call(
        webhooks.batch.create_namespaced_job,
        webhooks.namespace,
        labelled_job("after-rotation", {names.LABEL_QUEUE_NAME: "gpu"}),
    )
    assert created.spec.suspend is True


async def test_replicas_racing_on_a_fresh_cluster_agree_on_one_certificate(
    control_plane: Cluster, namespace: str, tmp_path: Path
) -> None:
    """Two controller replicas start together with no Secret: both end up serving the same pair."""
    api = await async_config.new_client_from_config(config_file=control_plane.kubeconfig)
    try:
        replicas = [
            CertManager(
                api,
                tmp_path / f"replica-{i}",
                namespace=namespace,
                mutating_configurations=[],
                validating_configurations=[],
            )
            for i in range(3)
        ]
        states = await asyncio.gather(*(r.ensure() for r in replicas))
        assert states[0] == states[1] == states[2]
        served = {(tmp_path / f"replica-{i}" / "tls.crt").read_bytes() for i in range(3)}
        assert served == {states[0].serving.cert_pem}
        assert await replicas[0].ensure() == states[0], "a settled Secret is left alone"
    finally:
        await api.close()


# --- failure policies, per route (issue 12, finding 6) -----------------------------------------


class TornCache(InMemoryLookup):
    """A lookup whose every queue question raises: an internal error in each Job decision."""

    def local_queue(self, namespace: str, name: str) -> str | None:
        raise RuntimeError("cache torn")


async def test_an_internal_error_refuses_queued_jobs_but_never_unlabelled_ones(
    webhooks: Webhooks, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(webhooks.lookup, "local_queue", TornCache().local_queue)
    ns = webhooks.namespace
    with pytest.raises(ApiException) as refused:
        await call(
            webhooks.batch.create_namespaced_job,
            ns,
            labelled_job("queued", {names.LABEL_QUEUE_NAME: "gpu"}),
        )
    assert "queuectl webhook failed internally" in str(refused.value.body)
    created = await call(webhooks.batch.create_namespaced_job, ns, labelled_job("unqueued", None))
    assert created.metadata.name == "unqueued"


# --- Workloads: only the controller grants an admission (finding 10) ---------------------------

ADMITTED_STATUS = {
    "admission": {
        "clusterQueue": "cq-a",
        "podSetAssignments": [{"name": "main", "count": 1, "flavors": {"nvidia.com/gpu": "h100"}}],
    },
    "conditions": [
        {
            "type": names.COND_QUOTA_RESERVED,
            "status": "True",
            "reason": "QuotaReserved",
            "message": "forged",
            "lastTransitionTime": "2026-01-01T00:00:00Z",
        }
    ],
}


@pytest.fixture
async def workload_crd(control_plane: Cluster) -> None:
    crd = CRDS / "workloads.queuectl.io.yaml"
    await call(control_plane.kubectl, "apply", "--server-side", "--force-conflicts", "-f", str(crd))
    await call(
        control_plane.kubectl,
        "wait",
        "--for=condition=Established",
        "crd/workloads.queuectl.io",
        "--timeout=60s",
    )


def as_controller(control_plane: Cluster) -> k8s.CustomObjectsApi:
    api = control_plane.api_client()
    api.set_default_header("Impersonate-User", names.CONTROLLER_USERNAME)  # type: ignore[no-untyped-call]
    api.set_default_header("Impersonate-Group", "system:masters")  # type: ignore[no-untyped-call]
    return k8s.CustomObjectsApi(api)


async def test_a_user_cannot_forge_an_admission_the_controller_can_write_one(
    webhooks: Webhooks, workload_crd: None, k8s_client: k8s.ApiClient, control_plane: Cluster
) -> None:
    custom = k8s.CustomObjectsApi(k8s_client)
    ns, plural = webhooks.namespace, "workloads"
    pod_set: dict[str, Any] = {
        "name": "main",
        "count": 1,
        "template": {"spec": {"containers": [{"name": "c", "image": "busybox"}]}},
    }
    body = {
        "apiVersion": names.API_VERSION,
        "kind": "Workload",
        "metadata": {"name": "forged"},
        "spec": {"queueName": "gpu", "podSets": [pod_set]},
    }
    await call(custom.create_namespaced_custom_object, names.GROUP, names.VERSION, ns, plural, body)
    patch = {"status": ADMITTED_STATUS}
    with pytest.raises(ApiException) as refused:
        await call(
            custom.patch_namespaced_custom_object_status,
            names.GROUP, names.VERSION, ns, plural, "forged", patch,
        )  # fmt: skip
    assert refused.value.status == 403
    assert "only the queuectl controller writes a Workload's status" in str(refused.value.body)

    controller = as_controller(control_plane)
    admitted = await call(
        controller.patch_namespaced_custom_object_status,
        names.GROUP, names.VERSION, ns, plural, "forged", patch,
    )  # fmt: skip
    assert admitted["status"]["admission"]["clusterQueue"] == "cq-a"
    scaled = {"spec": {"podSets": [pod_set | {"count": 8}]}}
    with pytest.raises(ApiException) as frozen:
        await call(
            custom.patch_namespaced_custom_object,
            names.GROUP, names.VERSION, ns, plural, "forged", scaled,
        )  # fmt: skip
    assert frozen.value.status in (403, 422)  # the CRD's CEL rule or the webhook, both refuse
