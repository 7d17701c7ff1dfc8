"""Write self-contained kubeconfig files (certificates embedded, nothing else to carry along)."""

from __future__ import annotations

import base64
from pathlib import Path

import yaml

from queuectl.testenv.pki import KeyPair


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def kubeconfig_dict(server: str, ca_pem: bytes, client: KeyPair, name: str) -> dict[str, object]:
    user = f"{name}-admin"
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": name,
                "cluster": {"server": server, "certificate-authority-data": _b64(ca_pem)},
            }
        ],
        "users": [
            {
                "name": user,
                "user": {
                    "client-certificate-data": _b64(client.cert_pem),
                    "client-key-data": _b64(client.key_pem),
                },
            }
        ],
        "contexts": [{"name": name, "context": {"cluster": name, "user": user}}],
        "current-context": name,
        "preferences": {},
    }


def write_kubeconfig(path: Path, server: str, ca_pem: bytes, client: KeyPair, name: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.touch(mode=0o600)
    path.write_text(yaml.safe_dump(kubeconfig_dict(server, ca_pem, client, name), sort_keys=False))
    return path
