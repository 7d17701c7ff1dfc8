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
import tempfile
from pathlib import Path

from queuectl.agent.deviceplugin.gen import KUBELET_MODULE, GenerateError, proto_from_module

PROTO_IN_MODULE = "pkg/apis/podresources/v1/api.proto"
STUBS = Path(__file__).resolve().parent / "v1"
PROTO = "podresources_v1.proto"
GENERATED = ("podresources_v1_pb2.py", "podresources_v1_pb2.pyi", "podresources_v1_pb2_grpc.py")


def generate(proto: Path, out: Path) -> None:
    """protoc (grpcio-tools) over `proto` into `out`, the gRPC module's import made relative."""
    try:
        from grpc_tools import protoc
    except ImportError:
        raise GenerateError("grpcio-tools is missing: pip install grpcio-tools") from None
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / PROTO
        shutil.copyfile(proto, src)
        argv = [
            "protoc",
            f"-I{tmp}",
            f"--python_out={out}",
            f"--pyi_out={out}",
            f"--grpc_python_out={out}",
            str(src),
        ]
        if protoc.main(argv) != 0:
            raise GenerateError(f"protoc failed on {proto}")
    grpc_module = out / GENERATED[2]
    text = grpc_module.read_text()
    grpc_module.write_text(
        text.replace("import podresources_v1_pb2 as", "from . import podresources_v1_pb2 as")
    )


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
