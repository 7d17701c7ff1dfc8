#!/usr/bin/env bash
# Build the queuectl OCI image without Docker or a registry (`make image`).
#   1. the project's wheel, and every dependency from deploy/image/requirements.lock (hashes
#      checked), downloaded on this machine as manylinux wheels for CPython 3.11
#   2. a Debian bookworm root filesystem (mmdebstrap, minbase + python3) with a venv at
#      /opt/queuectl into which the wheels are installed offline, and the non-root user 65532
#   3. packed as one layer into an OCI image layout (umoci) with the same user, entrypoint and
#      environment as the Dockerfile; the manifest digest is printed and written to digest.txt
# Output: $OUT (default build/image/oci), image reference "queuectl:$TAG" inside that layout.
# Needs root (mmdebstrap's root mode), mmdebstrap and umoci (installed with apt-get if missing),
# and network access to Debian's packages and PyPI.
set -euo pipefail
cd "$(dirname "$0")/../.."
TAG="${TAG:-$(python3 -c 'import tomllib;print(tomllib.load(open("pyproject.toml","rb"))["project"]["version"])')}"
WORK="${WORK:-build/image}"
OUT="${OUT:-$WORK/oci}"
SUITE="${SUITE:-bookworm}"
PY="${PY:-.venv/bin/python}"

need() {
  command -v "$1" >/dev/null && return
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "installing $2 (Debian package)" >&2
    apt-get update -qq >/dev/null  # a fresh machine's package lists may be empty
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$2" >/dev/null
  else
    echo "image: $1 is missing: install the Debian package $2 (apt-get install $2)" >&2
    exit 2
  fi
}
need mmdebstrap mmdebstrap
need umoci umoci

rm -rf "$WORK/wheels" "$OUT" "$WORK/rootfs.tar"
mkdir -p "$WORK/wheels"
echo "== wheels: queuectl and the locked dependencies (hashes checked)"
"$PY" -m pip wheel --quiet --no-deps -w "$WORK/wheels" .
PIP_FIND_LINKS= "$PY" -m pip download --quiet --require-hashes --no-deps --only-binary=:all: \
  --platform manylinux2014_x86_64 --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
  --platform any --python-version 3.11 --implementation cp \
  -d "$WORK/wheels" -r deploy/image/requirements.lock

echo "== root filesystem: Debian $SUITE minbase + python3, the venv installed offline"
# The lock's hashes are checked again inside the image, against the wheels we copy in.
mmdebstrap --quiet --variant=minbase --include=python3,python3-venv,ca-certificates \
  --customize-hook='mkdir -p "$1/tmp/wheels" "$1/tmp/lock"' \
  --customize-hook="copy-in $WORK/wheels/. /tmp/wheels" \
  --customize-hook="copy-in deploy/image/requirements.lock /tmp/lock" \
  --customize-hook='chroot "$1" python3 -m venv /opt/queuectl' \
  --customize-hook='chroot "$1" /opt/queuectl/bin/pip install --quiet --no-index --find-links /tmp/wheels --require-hashes -r /tmp/lock/requirements.lock' \
  --customize-hook='chroot "$1" sh -c "/opt/queuectl/bin/pip install --quiet --no-index --no-deps /tmp/wheels/queuectl-*.whl"' \
  --customize-hook='chroot "$1" /opt/queuectl/bin/python -c "import queuectl.cli.main"' \
  --customize-hook='chroot "$1" /opt/queuectl/bin/pip uninstall --quiet --yes pip' \
  --customize-hook='rm -rf "$1/tmp/wheels" "$1/tmp/lock" "$1"/var/cache/apt/* "$1"/var/lib/apt/lists/*' \
  --customize-hook='echo "queuectl:x:65532:65532:queuectl:/nonexistent:/usr/sbin/nologin" >> "$1/etc/passwd"' \
  --customize-hook='echo "queuectl:x:65532:" >> "$1/etc/group"' \
  "$SUITE" "$WORK/rootfs.tar"

echo "== OCI image: one layer, non-root, entrypoint queuectl"
umoci init --layout "$OUT"
umoci new --image "$OUT:$TAG"
umoci raw add-layer --image "$OUT:$TAG" "$WORK/rootfs.tar"
umoci config --image "$OUT:$TAG" \
  --config.user 65532:65532 --config.workingdir /tmp \
  --config.env PATH=/opt/queuectl/bin:/usr/sbin:/usr/bin:/sbin:/bin \
  --config.env PYTHONUNBUFFERED=1 --config.env PYTHONDONTWRITEBYTECODE=1 \
  --config.entrypoint queuectl --config.cmd controller \
  --config.label org.opencontainers.image.title=queuectl \
  --config.label org.opencontainers.image.version="$TAG"
umoci gc --layout "$OUT"
rm -f "$WORK/rootfs.tar"
digest=$(python3 -c 'import json,sys;print(json.load(open(sys.argv[1]+"/index.json"))["manifests"][0]["digest"])' "$OUT")
echo "$digest" > "$WORK/digest.txt"
echo "image queuectl:$TAG in $OUT (OCI layout), manifest digest $digest"
