"""Webhook certificates as pure functions: make a CA and a serving certificate, decide rotation.

`plan_certificates` takes what is stored (or nothing) and the time, and returns what should be
stored, with the reasons it changed. The async side (certmanager.py) only reads, writes and
patches. Keys are ECDSA P-256: small, fast to make, accepted by the API server.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

CA_VALIDITY = timedelta(days=3650)
SERVING_VALIDITY = timedelta(days=365)
ROTATE_AT_FRACTION = 2 / 3
CLOCK_SKEW = timedelta(minutes=5)  # certificates start a little in the past
LOCAL_IPS = ("127.0.0.1",)


@dataclass(frozen=True)
class CertPair:
    """A PEM certificate and its PEM (PKCS#8, unencrypted) private key."""

    cert_pem: bytes
    key_pem: bytes

    @property
    def cert(self) -> x509.Certificate:
        return x509.load_pem_x509_certificate(self.cert_pem)


@dataclass(frozen=True)
class CertState:
    """What the Secret holds: the CA, the serving pair, and the CA it replaced (still trusted)."""

    ca: CertPair
    serving: CertPair
    previous_ca_pem: bytes | None = None

    def ca_bundle(self) -> bytes:
        """PEM bundle to trust: the current CA, then the previous one while it is valid."""
        return self.ca.cert_pem + (self.previous_ca_pem or b"")


def service_dns_names(service: str, namespace: str) -> list[str]:
    """The names the API server may use to reach a webhook Service."""
    return [
        service,
        f"{service}.{namespace}",
        f"{service}.{namespace}.svc",
        f"{service}.{namespace}.svc.cluster.local",
    ]


def _new_key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def generate_ca(
    now: datetime, validity: timedelta = CA_VALIDITY, common_name: str = "queuectl-webhook-ca"
) -> CertPair:
    """A self-signed CA that may sign serving certificates only (path length 0)."""
    key = _new_key()
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - CLOCK_SKEW)
        .not_valid_after(now + validity)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                key_cert_sign=True,
                crl_sign=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    return CertPair(cert.public_bytes(serialization.Encoding.PEM), _key_pem(key))


def generate_serving_cert(
    ca: CertPair,
    dns_names: Sequence[str],
    ip_addresses: Sequence[str] = LOCAL_IPS,
    now: datetime | None = None,
    validity: timedelta = SERVING_VALIDITY,
) -> CertPair:
    """A TLS server certificate for the given names and IPs, signed by ca."""
    now = now or datetime.now(UTC)
    ca_cert = ca.cert
    ca_key = serialization.load_pem_private_key(ca.key_pem, password=None)
    assert isinstance(ca_key, ec.EllipticCurvePrivateKey)
    key = _new_key()
    sans: list[x509.GeneralName] = [x509.DNSName(n) for n in dns_names]
    sans += [x509.IPAddress(ipaddress.ip_address(ip)) for ip in ip_addresses]
    common_name = dns_names[0] if dns_names else ip_addresses[0]
    not_after = min(now + validity, ca_cert.not_valid_after_utc)
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)]))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - CLOCK_SKEW)
        .not_valid_after(not_after)
        .add_extension(x509.SubjectAlternativeName(sans), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False
        )
        .sign(ca_key, hashes.SHA256())
    )
    return CertPair(cert.public_bytes(serialization.Encoding.PEM), _key_pem(key))


def rotation_due(cert: x509.Certificate, fraction: float = ROTATE_AT_FRACTION) -> datetime:
    """When a certificate should be replaced: `fraction` of the way through its lifetime."""
    start, end = cert.not_valid_before_utc, cert.not_valid_after_utc
    return start + (end - start) * fraction


def _key_matches(pair: CertPair) -> bool:
    key = serialization.load_pem_private_key(pair.key_pem, password=None)
    return bool(key.public_key() == pair.cert.public_key())


def serving_problem(
    state: CertState,
    dns_names: Sequence[str],
    ip_addresses: Sequence[str],
    now: datetime,
    fraction: float = ROTATE_AT_FRACTION,
) -> str | None:
    """Why the serving certificate must be replaced, or None if it is fine."""
    try:
        cert = state.serving.cert
        if not _key_matches(state.serving):
            return "the serving key does not match its certificate"
        cert.verify_directly_issued_by(state.ca.cert)
    except (ValueError, TypeError, InvalidSignature) as exc:
        return f"the serving certificate is unusable or not signed by the CA ({exc})"
    if now >= rotation_due(cert, fraction):
        return f"the serving certificate is due for rotation (expires {cert.not_valid_after_utc})"
    sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    have_dns = set(sans.get_values_for_type(x509.DNSName))
    have_ips = {str(ip) for ip in sans.get_values_for_type(x509.IPAddress)}
    missing = sorted((set(dns_names) - have_dns) | (set(ip_addresses) - have_ips))
    if missing:
        return f"the serving certificate lacks names {missing}"
    return None


def ca_problem(ca: CertPair, now: datetime, fraction: float = ROTATE_AT_FRACTION) -> str | None:
    """Why the CA must be replaced, or None if it is fine."""
    try:
        cert = ca.cert
        if not _key_matches(ca):
            return "the CA key does not match its certificate"
    except (ValueError, TypeError) as exc:
        return f"the CA is unusable ({exc})"
    if now >= rotation_due(cert, fraction):
        return f"the CA is due for rotation (expires {cert.not_valid_after_utc})"
    return None


def plan_certificates(
    current: CertState | None,
    now: datetime,
    dns_names: Sequence[str],
    ip_addresses: Sequence[str] = LOCAL_IPS,
    ca_validity: timedelta = CA_VALIDITY,
    serving_validity: timedelta = SERVING_VALIDITY,
    fraction: float = ROTATE_AT_FRACTION,
) -> tuple[CertState, list[str]]:
    """The certificates to keep from now on, and why they differ from `current` (empty: same).

    A rotated CA stays in the bundle as `previous_ca_pem` until it expires, so a caller that
    publishes the bundle before the new serving certificate never breaks verification.
    """
    reasons: list[str] = []
    if current is None:
        ca = generate_ca(now, ca_validity)
        serving = generate_serving_cert(ca, dns_names, ip_addresses, now, serving_validity)
        return CertState(ca, serving), ["no certificates yet"]
    state = current
    previous = state.previous_ca_pem
    if previous is not None and _expired(previous, now):
        state = replace(state, previous_ca_pem=None)
        reasons.append("the previous CA expired and left the bundle")
    problem = ca_problem(state.ca, now, fraction)
    if problem:
        reasons.append(problem)
        old_ca = state.ca.cert_pem if not _expired(state.ca.cert_pem, now) else None
        state = replace(state, ca=generate_ca(now, ca_validity), previous_ca_pem=old_ca)
    problem = serving_problem(state, dns_names, ip_addresses, now, fraction)
    if problem:
        reasons.append(problem)
        serving = generate_serving_cert(state.ca, dns_names, ip_addresses, now, serving_validity)
        state = replace(state, serving=serving)
    return state, reasons


def _expired(cert_pem: bytes, now: datetime) -> bool:
    try:
        return now >= x509.load_pem_x509_certificate(cert_pem).not_valid_after_utc
    except ValueError:
        return True
