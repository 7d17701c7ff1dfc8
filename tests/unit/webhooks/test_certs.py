"""Certificates: what is generated, when it rotates, how it is stored and written."""

from __future__ import annotations

import ipaddress
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.x509.oid import ExtendedKeyUsageOID

from queuectl.webhooks.certmanager import state_from_data, state_to_data, write_files
from queuectl.webhooks.certs import (
    CA_VALIDITY,
    SERVING_VALIDITY,
    CertPair,
    CertState,
    generate_ca,
    generate_serving_cert,
    plan_certificates,
    rotation_due,
    service_dns_names,
)

T0 = datetime(2030, 1, 1, tzinfo=UTC)
DNS = service_dns_names("queuectl-webhook", "queuectl-system")
IPS = ["127.0.0.1"]


@pytest.fixture(scope="module")
def state() -> CertState:
    fresh, _ = plan_certificates(None, T0, DNS, IPS)
    return fresh


def test_service_names_cover_every_way_to_reach_the_service() -> None:
    assert DNS == [
        "queuectl-webhook",
        "queuectl-webhook.queuectl-system",
        "queuectl-webhook.queuectl-system.svc",
        "queuectl-webhook.queuectl-system.svc.cluster.local",
    ]


def test_the_ca_can_only_sign_leaf_certificates(state: CertState) -> None:
    ca = state.ca.cert
    constraints = ca.extensions.get_extension_for_class(x509.BasicConstraints).value
    assert constraints.ca is True and constraints.path_length == 0
    assert ca.not_valid_after_utc == T0 + CA_VALIDITY


def test_the_serving_certificate_names_the_service_and_loopback(state: CertState) -> None:
    cert = state.serving.cert
    sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert sans.get_values_for_type(x509.DNSName) == DNS
    assert sans.get_values_for_type(x509.IPAddress) == [ipaddress.ip_address("127.0.0.1")]
    usage = cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert list(usage) == [ExtendedKeyUsageOID.SERVER_AUTH]
    cert.verify_directly_issued_by(state.ca.cert)
    assert cert.not_valid_after_utc == T0 + SERVING_VALIDITY
    assert cert.not_valid_before_utc < T0, "a little slack for clocks that run behind"


def test_a_serving_certificate_never_outlives_its_ca() -> None:
    ca = generate_ca(T0, validity=timedelta(days=10))
    leaf = generate_serving_cert(ca, DNS, IPS, T0, validity=timedelta(days=365))
    assert leaf.cert.not_valid_after_utc == ca.cert.not_valid_after_utc


def test_rotation_is_due_at_two_thirds_of_the_lifetime(state: CertState) -> None:
    cert = state.serving.cert
    lifetime = cert.not_valid_after_utc - cert.not_valid_before_utc
    assert rotation_due(cert) == cert.not_valid_before_utc + lifetime * 2 / 3


@pytest.mark.parametrize(
    ("scenario", "when"),
    [
        ("right after creation", T0),
        ("just before the serving cert is due", T0 + timedelta(days=243)),
    ],
)
def test_healthy_certificates_are_kept(state: CertState, scenario: str, when: datetime) -> None:
    kept, reasons = plan_certificates(state, when, DNS, IPS)
    assert (kept, reasons) == (state, []), scenario


def test_serving_certificate_rotates_before_expiry_and_keeps_the_ca(state: CertState) -> None:
    later = T0 + timedelta(days=244)
    new, reasons = plan_certificates(state, later, DNS, IPS)
    assert len(reasons) == 1 and "due for rotation" in reasons[0]
    assert new.ca == state.ca and new.serving != state.serving
    assert new.serving.cert.not_valid_after_utc == later + SERVING_VALIDITY
    assert plan_certificates(new, later, DNS, IPS)[1] == [], "one rotation, then stable"


def test_ca_rotation_keeps_the_old_ca_trusted_until_it_expires(state: CertState) -> None:
    later = T0 + CA_VALIDITY * 0.7
    new, reasons = plan_certificates(state, later, DNS, IPS)
    assert any("CA is due" in r for r in reasons)
    assert new.ca != state.ca and new.previous_ca_pem == state.ca.cert_pem
    assert new.ca_bundle() == new.ca.cert_pem + state.ca.cert_pem
    new.serving.cert.verify_directly_issued_by(new.ca.cert)

    after_old_expiry = T0 + CA_VALIDITY + timedelta(days=1)
    final, reasons = plan_certificates(new, after_old_expiry, DNS, IPS)
    assert "the previous CA expired and left the bundle" in reasons
    assert final.previous_ca_pem is None and final.ca == new.ca


@pytest.mark.parametrize(
    ("scenario", "dns", "ips", "reason"),
    [
        ("service renamed", service_dns_names("other", "ns"), IPS, "lacks names"),
        ("new IP to serve", DNS, ["127.0.0.1", "10.0.0.7"], "lacks names ['10.0.0.7']"),
    ],
)
def test_missing_names_reissue_the_serving_certificate(
    state: CertState, scenario: str, dns: list[str], ips: list[str], reason: str
) -> None:
    new, reasons = plan_certificates(state, T0, dns, ips)
    assert any(reason in r for r in reasons), scenario
    assert new.ca == state.ca


def test_broken_or_foreign_serving_pairs_are_replaced(state: CertState) -> None:
    other_ca = generate_ca(T0)
    foreign = CertState(state.ca, generate_serving_cert(other_ca, DNS, IPS, T0))
    swapped_key = CertState(state.ca, CertPair(state.serving.cert_pem, other_ca.key_pem))
    garbage = CertState(state.ca, CertPair(b"junk", b"junk"))
    for scenario, broken in [("foreign", foreign), ("key", swapped_key), ("junk", garbage)]:
        fixed, reasons = plan_certificates(broken, T0, DNS, IPS)
        assert reasons, scenario
        fixed.serving.cert.verify_directly_issued_by(state.ca.cert)


def test_secret_data_round_trips(state: CertState) -> None:
    assert state_from_data(state_to_data(state)) == state
    rotated = CertState(state.ca, state.serving, previous_ca_pem=generate_ca(T0).cert_pem)
    assert state_from_data(state_to_data(rotated)) == rotated
    partial = {k: v for k, v in state_to_data(state).items() if k != "tls.key"}
    assert state_from_data(partial) is None and state_from_data(None) is None


def test_files_are_written_once_and_privately(tmp_path: Path, state: CertState) -> None:
    target = tmp_path / "certs"
    assert write_files(target, state) is True
    assert (target / "tls.crt").read_bytes() == state.serving.cert_pem
    assert (target / "tls.key").read_bytes() == state.serving.key_pem
    assert (target / "ca.crt").read_bytes() == state.ca_bundle()
    assert (target / "tls.key").stat().st_mode & 0o077 == 0
    assert write_files(target, state) is False, "unchanged content is not rewritten"
    assert sorted(p.name for p in target.iterdir()) == ["ca.crt", "tls.crt", "tls.key"]
