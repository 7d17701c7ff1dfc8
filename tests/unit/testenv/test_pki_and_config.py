"""Certificates say who a client is; kubeconfigs carry them; component flags stay consistent."""

from __future__ import annotations

import base64
import ipaddress
from pathlib import Path

import yaml
from cryptography import x509
from cryptography.x509.oid import NameOID

from queuectl.testenv import components as comp
from queuectl.testenv.build import Binaries
from queuectl.testenv.kubeconfig import write_kubeconfig
from queuectl.testenv.pki import CertificateAuthority


def test_an_admin_client_cert_puts_its_groups_in_o_and_is_signed_by_the_ca() -> None:
    ca = CertificateAuthority.create()
    cert = x509.load_pem_x509_certificate(ca.issue_client("admin", ("system:masters",)).cert_pem)
    cert.verify_directly_issued_by(ca.cert)
    assert cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value == "admin"
    orgs = [a.value for a in cert.subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)]
    assert orgs == ["system:masters"]


def test_a_serving_cert_names_127_0_0_1_in_its_san() -> None:
    ca = CertificateAuthority.create()
    cert = x509.load_pem_x509_certificate(ca.issue_server("webhook").cert_pem)
    sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert ipaddress.ip_address("127.0.0.1") in sans.get_values_for_type(x509.IPAddress)


def test_kubeconfig_embeds_everything_it_needs(tmp_path: Path) -> None:
    ca = CertificateAuthority.create()
    client = ca.issue_client("admin", ("system:masters",))
    path = write_kubeconfig(tmp_path / "kc", "https://127.0.0.1:1234", ca.cert_pem, client, "t")
    doc = yaml.safe_load(path.read_text())
    assert doc["clusters"][0]["cluster"]["server"] == "https://127.0.0.1:1234"
    user = doc["users"][0]["user"]
    assert base64.b64decode(user["client-certificate-data"]) == client.cert_pem
    assert path.stat().st_mode & 0o077 == 0, "credentials must not be world-readable"


def test_components_agree_on_ports_and_files(tmp_path: Path) -> None:
    lay = comp.Layout(tmp_path)
    ports = comp.Ports(1, 2, 3, 4, 5, 6)
    b = Binaries(tmp_path / "bin")
    api = comp.apiserver_argv(b, lay, ports)
    assert "--etcd-servers=http://127.0.0.1:1" in api
    assert "--secure-port=3" in api and "--authorization-mode=RBAC" in api
    assert "--listen-client-urls=http://127.0.0.1:1" in comp.etcd_argv(b, lay, ports)
    kcm = comp.controller_manager_argv(b, lay, ports)
    assert f"--service-account-private-key-file={lay.key('sa')}" in kcm
    assert f"--service-account-key-file={lay.cert('sa')}" in api
    kwok = comp.kwok_argv(b, lay, ports)
    assert all(Path(a.split("=", 1)[1]).exists() for a in kwok if a.startswith("--config="))
    # Nodes' Leases and the controller-manager's patience agree: at the default a node goes
    # NotReady after 50 s without a renewal; with a benchmark's 600 s Lease, after 600 s.
    assert "--node-lease-duration-seconds=40" in kwok
    assert "--node-monitor-grace-period=50s" in kcm
    assert "--node-lease-duration-seconds=600" in comp.kwok_argv(b, lay, ports, 600)
    assert "--node-monitor-grace-period=600s" in comp.controller_manager_argv(b, lay, ports, 600)
    config = yaml.safe_load(comp.scheduler_config(lay))
    assert config["clientConnection"]["kubeconfig"] == str(lay.kubeconfig("scheduler"))
    # The aggregation layer's front proxy, for the visibility API: its own CA and client cert.
    assert f"--requestheader-client-ca-file={lay.cert('front-proxy-ca')}" in api
    assert f"--proxy-client-cert-file={lay.cert('front-proxy-client')}" in api
    assert "--requestheader-allowed-names=front-proxy-client" in api
