"""The cert-manager overlay hands the webhook certificate to cert-manager, end to end.

cert-manager issues a certificate for the webhook Service's DNS names into a Secret; the
controller serves it from a read-only mount (--cert-mode=external --cert-dir) and leaves caBundle
to cert-manager's CA injector. The base keeps the self-managed mode.
"""

from __future__ import annotations

from deploy_manifests import Obj, one

from queuectl.api import names

INJECT_CA_FROM = "cert-manager.io/inject-ca-from"
CONFIG_KINDS = ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration")


def _controller(objects: list[Obj]) -> dict[str, object]:
    dep = one(objects, "Deployment", "queuectl-controller")
    return dict(dep["spec"]["template"]["spec"]["containers"][0])


def _arg(objects: list[Obj], name: str) -> str | None:
    args = _controller(objects)["args"]
    assert isinstance(args, list)
    values = [a.split("=", 1)[1] for a in args if a.startswith(f"--{name}=")]
    assert len(values) <= 1, f"--{name} given twice"
    return values[0] if values else None


def test_a_self_signed_issuer_signs_the_webhook_certificate(cert_manager: list[Obj]) -> None:
    issuer = one(cert_manager, "Issuer")
    assert issuer["spec"] == {"selfSigned": {}}
    cert = one(cert_manager, "Certificate")
    assert cert["spec"]["issuerRef"] == {"kind": "Issuer", "name": issuer["metadata"]["name"]}
    svc, ns = names.WEBHOOK_SERVICE, names.SYSTEM_NAMESPACE
    assert f"{svc}.{ns}.svc" in cert["spec"]["dnsNames"]
    assert f"{svc}.{ns}.svc.cluster.local" in cert["spec"]["dnsNames"]


def test_both_webhook_configurations_get_the_ca_from_the_certificate(
    cert_manager: list[Obj],
) -> None:
    cert = one(cert_manager, "Certificate")
    expected = f"{cert['metadata']['namespace']}/{cert['metadata']['name']}"
    for kind in CONFIG_KINDS:
        assert one(cert_manager, kind)["metadata"]["annotations"][INJECT_CA_FROM] == expected


def test_the_controller_serves_the_issued_certificate_from_a_read_only_mount(
    cert_manager: list[Obj],
) -> None:
    secret = one(cert_manager, "Certificate")["spec"]["secretName"]
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
