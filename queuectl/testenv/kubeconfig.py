"""Kubeconfig files: self-contained ones for testenv (certificates embedded), and the plain-HTTP
client side of the fault proxy (its server the proxy, its TLS and identity added by the proxy)."""

from __future__ import annotations

import base64
import ssl
import tempfile
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

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


# ---- a client through a proxy (testenv.faultproxy) --------------------------------------------
def _kubeconfig_parts(
    kubeconfig: str | Path,
) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """The whole config, its current cluster and its current user (certificate-data only)."""
    config: dict[str, Any] = yaml.safe_load(Path(kubeconfig).read_text())
    context = next(c for c in config["contexts"] if c["name"] == config["current-context"])
    cluster = next(c for c in config["clusters"] if c["name"] == context["context"]["cluster"])
    user = next(u for u in config["users"] if u["name"] == context["context"]["user"])
    return config, cluster["cluster"], user["user"]


def upstream_tls_from_kubeconfig(kubeconfig: str | Path) -> tuple[tuple[str, int], ssl.SSLContext]:
    """The API server's address and a TLS context that authenticates as the kubeconfig's user."""
    _, cluster, user = _kubeconfig_parts(kubeconfig)
    url = urlsplit(cluster["server"])
    if url.scheme != "https" or not url.hostname:
        raise ValueError(f"{kubeconfig}: the server must be https://host:port, not {url.geturl()}")
    missing = [k for k in ("client-certificate-data", "client-key-data") if k not in user]
    if missing or "certificate-authority-data" not in cluster:
        raise ValueError(
            f"{kubeconfig}: the proxy needs embedded certificate data (missing {missing or 'CA'}); "
            "testenv's kubeconfigs embed them"
        )
    ctx = ssl.create_default_context(
        cadata=base64.b64decode(cluster["certificate-authority-data"]).decode()
    )
    with tempfile.TemporaryDirectory() as tmp:  # load_cert_chain reads files only
        cert, key = Path(tmp) / "c.crt", Path(tmp) / "c.key"
        cert.write_bytes(base64.b64decode(user["client-certificate-data"]))
        key.write_bytes(base64.b64decode(user["client-key-data"]))
        ctx.load_cert_chain(cert, key)
    return (url.hostname, url.port or 443), ctx


def write_proxied_kubeconfig(
    kubeconfig: str | Path, dest: str | Path, proxy: tuple[str, int]
) -> Path:
    """A copy of `kubeconfig` whose server is http://<proxy>; the proxy adds TLS and the user."""
    config, cluster, user = _kubeconfig_parts(kubeconfig)
    cluster.pop("certificate-authority-data", None)
    cluster["server"] = f"http://{proxy[0]}:{proxy[1]}"
    user.clear()  # the proxy authenticates upstream with the client certificate
    path = Path(dest)
    path.touch(mode=0o600)
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path
