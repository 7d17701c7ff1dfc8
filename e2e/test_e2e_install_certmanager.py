"""The cert-manager overlay with real cert-manager, on the real node (issue 13 item 3).

cert-manager v1.21.2 (controller + CA injector, built from its Go module, run as processes
against the cluster: testenv.certmanager) issues the overlay's CA and serving certificates;
`kubectl apply -k deploy/kustomize/overlays/cert-manager` (with only the local image pinned onto
the real node) runs the 2-replica controller Deployment in the real node's containerd. Then:
- both Certificates are issued and the injector puts the CA into both webhook configurations;
- every replica serves the issued serving certificate (read over TLS from the pod IPs);
- a forced renewal (what `cmctl renew` does: the Issuing condition set on the Certificate)
  while Jobs keep arriving refuses none: every Job is created suspended with its queue label,
  every replica moves to the new certificate without a restart, and every Job is admitted.
"""

from __future__ import annotations

import base64
import json
import socket
import ssl
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from functools import partial
from typing import Any

import pytest

from e2e.harness import apply, cluster_queue, flavor, local_queue
from e2e.jobflow import JobFlow
from queuectl.testenv import eventually
from queuectl.testenv.nodes import H100
from queuectl.testenv.realinstall import CERT_MANAGER_OVERLAY, NAMESPACE, RealInstall, real_install

pytestmark = [pytest.mark.cluster, pytest.mark.real_node]

TEAM = "team-cm"
CA, TLS = "queuectl-webhook-ca", "queuectl-webhook-tls"
WEBHOOK_CONFIGS = (
    ("mutatingwebhookconfiguration", "queuectl-mutating"),
    ("validatingwebhookconfiguration", "queuectl-validating"),
)


@pytest.fixture(scope="module")
def install(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RealInstall]:
    work = tmp_path_factory.mktemp("install-cm")
    with real_install(work, CERT_MANAGER_OVERLAY, cert_manager=True) as installed:
        installed.wait_ready(2, timeout=300)
        # The queuectl resources below go through the Fail-policy webhooks: wait for the CA.
        log = installed.plane.work_dir / "logs" / "cert-manager-cainjector.log"
        try:
            eventually(
                lambda: ca_bundles(installed),
                lambda b: b == {secret(installed, CA)["ca.crt"]},
                timeout=120,
                what="the CA injected into both webhook configurations",
            )
        except Exception as exc:
            raise AssertionError(f"{exc}\ncainjector log:\n{log.read_text()[-3000:]}") from exc
        installed.plane.kubectl("create", "namespace", TEAM)
        apply(
            installed.plane,
            flavor("h100", H100),
            cluster_queue("cq-cm", TEAM, {"h100": 16}),
            local_queue("lq", TEAM, "cq-cm"),
        )
        yield installed


def secret(install: RealInstall, name: str) -> dict[str, bytes]:
    out = install.plane.kubectl("get", "secret", name, "-n", NAMESPACE, "-o", "json").stdout
    return {k: base64.b64decode(v) for k, v in json.loads(out)["data"].items()}


def first_der(pem: bytes) -> bytes:
    """The DER of the first certificate in a PEM chain (the leaf)."""
    block = pem.decode().split("-----END CERTIFICATE-----")[0] + "-----END CERTIFICATE-----\n"
    return ssl.PEM_cert_to_DER_cert(block)


def served_certificate(pod_ip: str) -> bytes:
    """The certificate the webhook server on `pod_ip` presents (not verified: compared)."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    with socket.create_connection((pod_ip, 9443), timeout=5) as raw, ctx.wrap_socket(raw) as tls:
        der = tls.getpeercert(binary_form=True)
    assert der is not None
    return der


def served_by_every_replica(install: RealInstall) -> set[bytes]:
    ips = [p["status"]["podIP"] for p in install.controller_pods() if p["status"].get("podIP")]
    return {served_certificate(ip) for ip in ips}


def ca_bundles(install: RealInstall) -> set[bytes]:
    found = set()
    for kind, name in WEBHOOK_CONFIGS:
        obj: dict[str, Any] = json.loads(
            install.plane.kubectl("get", kind, name, "-o", "json").stdout
        )
        for hook in obj["webhooks"]:
            found.add(base64.b64decode(hook["clientConfig"].get("caBundle", "")))
    return found


def certificate_ready(install: RealInstall, name: str) -> bool:
    out = install.plane.kubectl("get", "certificate", name, "-n", NAMESPACE, "-o", "json").stdout
    conditions = (json.loads(out).get("status") or {}).get("conditions") or []
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)


def test_certificates_are_issued_and_the_ca_injected_into_both_webhook_configurations(
    install: RealInstall,
) -> None:
    for name in (CA, TLS):
        eventually(partial(certificate_ready, install, name), bool, timeout=120, what=name)
    ca = secret(install, CA)["ca.crt"]
    bundles = eventually(
        lambda: ca_bundles(install), lambda b: b == {ca}, timeout=120, what="caBundle injected"
    )
    assert bundles == {ca}
    # The serving certificate chains to that CA (the CA issuer puts it in ca.crt).
    assert secret(install, TLS)["ca.crt"] == ca


def test_every_replica_serves_the_certificate_cert_manager_issued(install: RealInstall) -> None:
    issued = first_der(secret(install, TLS)["tls.crt"])
    assert served_by_every_replica(install) == {issued}


def force_renewal(install: RealInstall, name: str) -> None:
    """`cmctl renew`: the Issuing condition, set True with reason ManuallyTriggered."""
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    condition = {"type": "Issuing", "status": "True", "reason": "ManuallyTriggered",
                 "message": "forced by the e2e test", "lastTransitionTime": now}  # fmt: skip
    patch = [{"op": "add", "path": "/status/conditions/-", "value": condition}]
    install.plane.kubectl("patch", "certificate", name, "-n", NAMESPACE, "--subresource=status",
                          "--type=json", "-p", json.dumps(patch))  # fmt: skip


def unsuspended(install: RealInstall, names: set[str]) -> set[str]:
    out = install.plane.kubectl("get", "jobs", "-n", TEAM, "-o", "json").stdout
    return {
        j["metadata"]["name"]
        for j in json.loads(out)["items"]
        if j["metadata"]["name"] in names and j["spec"].get("suspend") is False
    }


def test_a_forced_renewal_while_jobs_arrive_refuses_none_and_every_replica_moves_to_it(
    install: RealInstall,
) -> None:
    eventually(lambda: certificate_ready(install, TLS), bool, timeout=120, what=TLS)
    before = first_der(secret(install, TLS)["tls.crt"])
    bundle_before = ca_bundles(install)
    flow = JobFlow(install.plane, TEAM, "lq", "renew", interval=1.0).start()
    try:
        time.sleep(3)  # Jobs flowing before the renewal starts
        force_renewal(install, TLS)
        renewed = eventually(
            lambda: first_der(secret(install, TLS)["tls.crt"]),
            lambda der: der != before,
            timeout=120,
            what="a new serving certificate in the Secret",
        )
        # The kubelet refreshes the mounted Secret on its next pod sync (up to ~1 min); the
        # controller's TLS context reloads on the next handshake after the files change.
        eventually(
            lambda: served_by_every_replica(install),
            lambda served: served == {renewed},
            timeout=240,
            what="every replica serving the renewed certificate",
        )
        time.sleep(3)  # and Jobs still flowing after it
    finally:
        flow.stop()
    assert flow.refused == []
    assert len(flow.created) >= 10, "too few Jobs were created to show anything"
    assert flow.not_queued() == []
    assert ca_bundles(install) == bundle_before  # the CA's key is kept: no caBundle change
    eventually(
        lambda: unsuspended(install, set(flow.created)),
        lambda done: done == set(flow.created),
        timeout=300,
        what="every Job created during the renewal admitted",
    )
