"""Regenerate the committed PodResources stubs (`v1/`) from the kubelet's proto.

`python -m queuectl.agent.podresources.gen` copies `pkg/apis/podresources/v1/api.proto` out of
the Go module k8s.io/kubelet (the version the device plugin's proto came from) and runs
grpcio-tools' protoc on it; `--proto FILE` skips Go. The proto is kept as
`podresources_v1.proto`: protobuf's descriptor pool is keyed by file name, and the device
plugin's proto is already `api.proto` in the same process.
"""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

from queuectl.agent.deviceplugin.gen import KUBELET_MODULE, GenerateError, proto_from_module
from queuectl.agent.deviceplugin.gen import generate as protoc_stubs

PROTO_IN_MODULE = "pkg/apis/podresources/v1/api.proto"
STUBS = Path(__file__).resolve().parent / "v1"
PROTO = "podresources_v1.proto"
GENERATED = ("podresources_v1_pb2.py", "podresources_v1_pb2.pyi", "podresources_v1_pb2_grpc.py")


def generate(proto: Path, out: Path) -> None:
    """protoc (grpcio-tools) over `proto` into `out`, as the device plugin's stubs are made."""
    protoc_stubs(proto, out, PROTO.removesuffix(".proto"))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--proto", type=Path, help="api.proto to use instead of the Go module's")
    args = parser.parse_args(argv)
    try:
        proto = args.proto or proto_from_module(KUBELET_MODULE, PROTO_IN_MODULE)
        if proto.resolve() != (STUBS / PROTO).resolve():
            shutil.copyfile(proto, STUBS / PROTO)
        generate(STUBS / PROTO, STUBS)
    except GenerateError as exc:
        print(f"gen: {exc}", file=sys.stderr)
        return 1
    print(f"wrote {', '.join(GENERATED)} in {STUBS} from {proto}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
