"""The visibility listener's TLS: every context the reloader builds asks for and verifies the
front proxy's client certificate, so a rotated serving certificate does not silently turn the
check off (the SNI callback moves each connection onto the newest context)."""

from __future__ import annotations

import os
import ssl
from pathlib import Path

from queuectl.testenv.pki import CertificateAuthority
from queuectl.webhooks.tls import ReloadingTLS


def test_the_client_ca_survives_a_certificate_rotation(tmp_path: Path) -> None:
    serving = CertificateAuthority.create("serving")
    serving.issue_server("visibility").write(tmp_path, "tls")
    proxy_ca = CertificateAuthority.create("front-proxy")
    tls = ReloadingTLS(tmp_path, min_check_interval=0, client_ca=proxy_ca.cert_pem)
    assert tls.base.verify_mode == tls.current.verify_mode == ssl.CERT_OPTIONAL

    serving.issue_server("visibility").write(tmp_path, "tls")
    os.utime(tmp_path / "tls.crt", ns=(1, 1))  # a changed stat signature, whatever the clock
    assert tls.reload_if_changed()
    assert tls.current.verify_mode == ssl.CERT_OPTIONAL
    assert [c["subject"] for c in tls.current.get_ca_certs()] == [
        c["subject"] for c in tls.base.get_ca_certs()
    ]


def test_the_webhook_listener_asks_for_no_client_certificate(tmp_path: Path) -> None:
    CertificateAuthority.create("serving").issue_server("webhook").write(tmp_path, "tls")
    assert ReloadingTLS(tmp_path).current.verify_mode == ssl.CERT_NONE
