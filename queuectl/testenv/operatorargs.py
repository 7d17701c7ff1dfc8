"""Per-run files of one operator process: its ports, serving certificate and config file.

Kept apart from operatorrun.py (which starts them) so the generated config can be read and
unit-tested in one place, as components.py does for the control plane.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import yaml

from queuectl.testenv.pki import CertificateAuthority

HOST = "127.0.0.1"


@dataclass(frozen=True)
class RunDir:
    """Where one operator's files live, and the loopback ports it serves on."""

    root: Path
    health_port: int
    webhook_port: int

    @property
    def config(self) -> Path:
        return self.root / "config.yaml"

    @property
    def tmp(self) -> Path:
        """The operator's TMPDIR: controller-runtime's default webhook cert dir is
        $TMPDIR/k8s-webhook-server/serving-certs, so an operator with no cert-dir setting
        (Trainer) still finds this run's certificate, and two clusters never share one."""
        return self.root / "tmp"

    @property
    def cert_dir(self) -> Path:
        return self.tmp / "k8s-webhook-server" / "serving-certs"

    @classmethod
    def create(cls, root: Path, health_port: int, webhook_port: int) -> RunDir:
        """Make the directory and a self-signed serving certificate for 127.0.0.1.

        The kubebuilder operators start a webhook server whether or not anything calls it, and
        controller-runtime refuses to start without tls.crt/tls.key in its cert dir; their own
        cert rotator would need a Secret and a Service in-cluster, so it is switched off.
        """
        run = cls(root, health_port, webhook_port)
        ca = CertificateAuthority.create(f"{root.name}-webhook-ca")
        pair = ca.issue_server(f"{root.name}-webhook", ips=(HOST,), dns=("localhost",))
        run.cert_dir.mkdir(parents=True, exist_ok=True)
        (run.cert_dir / "tls.crt").write_bytes(pair.cert_pem + ca.cert_pem)
        key = run.cert_dir / "tls.key"
        key.touch(mode=0o600)
        key.write_bytes(pair.key_pem)
        (run.cert_dir / "ca.crt").write_bytes(ca.cert_pem)
        return run


def kubebuilder_config(
    api_version: str, run: RunDir, *, cert_key: str = "internalCertManagement"
) -> str:
    """The component config JobSet, LWS and Trainer read with --config: no leader election
    (one replica), no in-cluster cert management (it wants a Secret and a Service), no metrics
    server (it would need TokenReview wiring and a port), health and webhook on loopback ports
    picked per run. Trainer calls the cert switch `certManagement` and has no certDir (TMPDIR
    covers it); unknown fields would be rejected, so only the ones each knows are written."""
    webhook: dict[str, object] = {"host": HOST, "port": run.webhook_port}
    if cert_key == "internalCertManagement":
        webhook["certDir"] = str(run.cert_dir)
    config = {
        "apiVersion": api_version,
        "kind": "Configuration",
        "leaderElection": {"leaderElect": False},
        cert_key: {"enable": False},
        "webhook": webhook,
        "metrics": {"bindAddress": "0"},
        "health": {"healthProbeBindAddress": f"{HOST}:{run.health_port}"},
    }
    return yaml.safe_dump(config, sort_keys=False)
