"""Regenerate the committed device plugin stubs (`v1beta1/`) from the kubelet's proto.

`python -m queuectl.agent.deviceplugin.gen` copies `api.proto` out of the Go module
k8s.io/kubelet (`go mod download`, from the module proxy) and runs grpcio-tools' protoc on it;
`--proto FILE` skips Go and uses a proto at hand. The stubs are committed, so the agent needs
only grpcio and protobuf at run time; `tests/unit/agent/test_deviceplugin_stubs.py` regenerates
them from the committed proto and fails when they differ.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

KUBELET_MODULE = "k8s.io/kubelet@v0.36.3"
PROTO_IN_MODULE = "pkg/apis/deviceplugin/v1beta1/api.proto"
STUBS = Path(__file__).resolve().parent / "v1beta1"
GENERATED = ("api_pb2.py", "api_pb2.pyi", "api_pb2_grpc.py")


class GenerateError(RuntimeError):
    """The stubs could not be generated; the message says why and what to do."""


def proto_from_module(module: str = KUBELET_MODULE, path: str = PROTO_IN_MODULE) -> Path:
    """A proto of the kubelet module (default: the device plugin's), downloaded through the Go
    module proxy if needed."""
    try:
        done = subprocess.run(
            ["go", "mod", "download", "-json", module],
            capture_output=True,
            text=True,
            timeout=300,
            check=True,
        )
    except (OSError, subprocess.SubprocessError) as exc:
        raise GenerateError(
            f"`go mod download {module}` failed ({exc}): install Go or pass --proto FILE"
        ) from None
    return Path(json.loads(done.stdout)["Dir"]) / path


def generate(proto: Path, out: Path, name: str = "api") -> None:
    """protoc (grpcio-tools) over `proto`, as `<name>.proto`, into `out`: messages, their .pyi,
    the gRPC stubs.

    protoc writes `import <name>_pb2` in the gRPC module; it is made relative so the stubs
    import as a package (`queuectl.agent.deviceplugin.v1beta1`)."""
    try:
        from grpc_tools import protoc
    except ImportError:
        raise GenerateError("grpcio-tools is missing: pip install grpcio-tools") from None
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / f"{name}.proto"
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
    grpc_module = out / f"{name}_pb2_grpc.py"
    text = grpc_module.read_text()
    grpc_module.write_text(text.replace(f"import {name}_pb2 as", f"from . import {name}_pb2 as"))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--proto", type=Path, help="api.proto to use instead of the Go module's")
    args = parser.parse_args(argv)
    try:
        proto = args.proto or proto_from_module()
        if proto.resolve() != (STUBS / "api.proto").resolve():
            shutil.copyfile(proto, STUBS / "api.proto")
        generate(STUBS / "api.proto", STUBS)
    except GenerateError as exc:
        print(f"gen: {exc}", file=sys.stderr)
        return 1
    print(f"wrote {', '.join(GENERATED)} in {STUBS} from {proto}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
