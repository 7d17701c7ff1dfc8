"""The cert-manager overlay hands the webhook certificate to cert-manager, end to end.

cert-manager keeps a CA and issues a certificate for the webhook Service's DNS names with it; the
controller serves it from a read-only mount (--cert-mode=external --cert-dir) and leaves caBundle
to cert-manager's CA injector. The base keeps the self-managed mode.
"""

from __future__ import annotations

from deploy_manifests import Obj, one

from queuectl.api import names

INJECT_CA_FROM = "cert-manager.io/inject-ca-from"
CONFIG_KINDS = ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration")
CA, SERVING = "queuectl-webhook-ca", "queuectl-webhook-tls"


def _controller(objects: list[Obj]) -> dict[str, object]:
    dep = one(objects, "Deployment", "queuectl-controller")
    return dict(dep["spec"]["template"]["spec"]["containers"][0])


def _arg(objects: list[Obj], name: str) -> str | None:
    args = _controller(objects)["args"]
    assert isinstance(args, list)
    values = [a.split("=", 1)[1] for a in args if a.startswith(f"--{name}=")]
    assert len(values) <= 1, f"--{name} given twice"
    return values[0] if values else None


def _issuer_of(objects: list[Obj], cert: Obj) -> Obj:
    ref = cert["spec"]["issuerRef"]
    assert ref["kind"] == "Issuer" and ref.get("group", "cert-manager.io") == "cert-manager.io"
    return one(objects, "Issuer", ref["name"])


def test_a_ca_chain_signs_the_webhook_certificate(cert_manager: list[Obj]) -> None:
    """self-signed Issuer -> CA Certificate -> CA Issuer -> serving Certificate."""
    serving = one(cert_manager, "Certificate", SERVING)
    ca_issuer = _issuer_of(cert_manager, serving)
    ca = one(cert_manager, "Certificate", CA)
    assert ca_issuer["spec"] == {"ca": {"secretName": ca["spec"]["secretName"]}}
    assert ca["spec"]["isCA"] is True
    assert _issuer_of(cert_manager, ca)["spec"] == {"selfSigned": {}}
    assert not serving["spec"].get("isCA")
    svc, ns = names.WEBHOOK_SERVICE, names.SYSTEM_NAMESPACE
    assert f"{svc}.{ns}.svc" in serving["spec"]["dnsNames"]
    assert f"{svc}.{ns}.svc.cluster.local" in serving["spec"]["dnsNames"]


def test_renewals_keep_the_trusted_ca(cert_manager: list[Obj]) -> None:
    """The CA keeps its key when renewed and outlives many serving certificates."""
    ca, serving = one(cert_manager, "Certificate", CA), one(cert_manager, "Certificate", SERVING)
    assert ca["spec"]["privateKey"]["rotationPolicy"] == "Never"
    assert _hours(ca["spec"]["duration"]) >= 10 * _hours(serving["spec"]["duration"])
    for cert in (ca, serving):
        assert _hours(cert["spec"]["renewBefore"]) < _hours(cert["spec"]["duration"])


def _hours(duration: str) -> int:
    assert duration.endswith("h"), duration
    return int(duration[:-1])


def test_both_webhook_configurations_get_the_ca_from_the_ca_certificate(
    cert_manager: list[Obj],
) -> None:
    ca = one(cert_manager, "Certificate", CA)
    expected = f"{ca['metadata']['namespace']}/{ca['metadata']['name']}"
    for kind in CONFIG_KINDS:
        assert one(cert_manager, kind)["metadata"]["annotations"][INJECT_CA_FROM] == expected


def test_the_controller_serves_the_issued_certificate_from_a_read_only_mount(
    cert_manager: list[Obj],
) -> None:
    secret = one(cert_manager, "Certificate", SERVING)["spec"]["secretName"]
    pod = one(cert_manager, "Deployment")["spec"]["template"]["spec"]
    [volume] = [v for v in pod["volumes"] if v.get("secret", {}).get("secretName") == secret]
    mounts = _controller(cert_manager)["volumeMounts"]
    assert isinstance(mounts, list)
    [mount] = [m for m in mounts if m["name"] == volume["name"]]
    assert mount["readOnly"] is True
    assert _arg(cert_manager, "cert-mode") == "external"
    assert _arg(cert_manager, "cert-dir") == mount["mountPath"]


def test_the_base_manages_its_own_certificates(base: list[Obj]) -> None:
    assert _arg(base, "cert-mode") in (None, "self")
    assert _arg(base, "cert-dir") is None
    for kind in CONFIG_KINDS:
        assert INJECT_CA_FROM not in (one(base, kind)["metadata"].get("annotations") or {})
    assert not [o for o in base if o["apiVersion"].startswith("cert-manager.io/")]


def test_the_overlay_changes_nothing_else_in_the_controller(
    base: list[Obj], cert_manager: list[Obj]
) -> None:
    before, after = _controller(base), _controller(cert_manager)
    for key in set(before) | set(after):
        if key not in ("args", "volumeMounts"):
            assert before.get(key) == after.get(key), key
    assert isinstance(before["args"], list) and isinstance(after["args"], list)
    assert after["args"][: len(before["args"])] == before["args"]
