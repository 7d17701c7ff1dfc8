"""Write a one-binary OCI image archive that `ctr images import` loads, with no registry.

The real node's sandbox ("pause") image and its test workload are one static Go program built
with the kubelet (gonode/pause); this wraps it as a single uncompressed layer. Deterministic:
fixed mtimes and ownership, so the same binary always gives the same image digest.
"""

from __future__ import annotations

import hashlib
import io
import json
import tarfile
from pathlib import Path


def _blob(out: dict[str, bytes], data: bytes) -> dict[str, object]:
    digest = "sha256:" + hashlib.sha256(data).hexdigest()
    out[f"blobs/sha256/{digest.removeprefix('sha256:')}"] = data
    return {"digest": digest, "size": len(data)}


def _add(archive: tarfile.TarFile, name: str, data: bytes, mode: int = 0o644) -> None:
    info = tarfile.TarInfo(name)
    info.size, info.mode, info.mtime = len(data), mode, 0
    archive.addfile(info, io.BytesIO(data))


def single_binary_image(binary: Path, image: str, entrypoint: str, dest: Path) -> str:
    """Write `dest` (an OCI image-layout tar) holding `binary` as `entrypoint`; return the digest.

    `image` is the full reference (e.g. `localhost/queuectl/pause:v1`) the runtime will know
    it by; the image runs as uid 65535 like the upstream pause image.
    """
    layer_buf = io.BytesIO()
    with tarfile.open(fileobj=layer_buf, mode="w", format=tarfile.PAX_FORMAT) as layer:
        _add(layer, entrypoint.lstrip("/"), binary.read_bytes(), mode=0o755)
    layer_bytes = layer_buf.getvalue()
    blobs: dict[str, bytes] = {}
    layer_ref = _blob(blobs, layer_bytes)
    config = {
        "architecture": "amd64",
        "os": "linux",
        "config": {"Entrypoint": [entrypoint], "User": "65535:65535"},
        "rootfs": {"type": "layers", "diff_ids": [layer_ref["digest"]]},
    }
    config_ref = _blob(blobs, json.dumps(config, sort_keys=True).encode())
    manifest = {
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {"mediaType": "application/vnd.oci.image.config.v1+json", **config_ref},
        "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar", **layer_ref}],
    }
    manifest_ref = _blob(blobs, json.dumps(manifest, sort_keys=True).encode())
    index = {
        "schemaVersion": 2,
        "manifests": [
            {
                "mediaType": "application/vnd.oci.image.manifest.v1+json",
                **manifest_ref,
                "annotations": {
                    "io.containerd.image.name": image,
                    "org.opencontainers.image.ref.name": image.rsplit(":", 1)[-1],
                },
            }
        ],
    }
    dest.parent.mkdir(parents=True, exist_ok=True)
    with tarfile.open(dest, mode="w", format=tarfile.PAX_FORMAT) as archive:
        _add(archive, "oci-layout", b'{"imageLayoutVersion": "1.0.0"}')
        _add(archive, "index.json", json.dumps(index, sort_keys=True).encode())
        for name, data in sorted(blobs.items()):
            _add(archive, name, data)
    return str(manifest_ref["digest"])
