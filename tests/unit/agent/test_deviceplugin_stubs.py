"""The committed device plugin stubs are what protoc makes of the committed kubelet proto.

Committed (not generated at build time) so the agent's image needs grpcio and protobuf only;
this test keeps them honest: edit the proto or bump grpcio-tools without regenerating
(`python -m queuectl.agent.deviceplugin.gen`) and it fails, naming the file that differs.
"""

from __future__ import annotations

from pathlib import Path

from queuectl.agent.deviceplugin.gen import GENERATED, STUBS, generate


def test_the_committed_stubs_match_a_fresh_protoc_run_over_the_committed_proto(
    tmp_path: Path,
) -> None:
    generate(STUBS / "api.proto", tmp_path)
    stale = [n for n in GENERATED if (tmp_path / n).read_text() != (STUBS / n).read_text()]
    assert stale == [], f"regenerate with `python -m queuectl.agent.deviceplugin.gen`: {stale}"


def test_the_committed_proto_is_the_kubelet_v1beta1_device_plugin_api() -> None:
    proto = (STUBS / "api.proto").read_text()
    assert 'option go_package = "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1";' in proto
    for call in ("Register", "GetDevicePluginOptions", "ListAndWatch", "Allocate"):
        assert f"rpc {call}(" in proto
