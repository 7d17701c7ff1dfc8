"""The committed PodResources stubs are what protoc makes of the committed kubelet proto."""

from __future__ import annotations

from pathlib import Path

from queuectl.agent.podresources.gen import GENERATED, PROTO, STUBS, generate


def test_the_committed_stubs_match_a_fresh_protoc_run_over_the_committed_proto(
    tmp_path: Path,
) -> None:
    generate(STUBS / PROTO, tmp_path)
    stale = [n for n in GENERATED if (tmp_path / n).read_text() != (STUBS / n).read_text()]
    assert stale == [], f"regenerate with `python -m queuectl.agent.podresources.gen`: {stale}"


def test_the_committed_proto_is_the_kubelet_v1_pod_resources_api() -> None:
    proto = (STUBS / PROTO).read_text()
    assert 'option go_package = "k8s.io/kubelet/pkg/apis/podresources/v1";' in proto
    assert "rpc List(ListPodResourcesRequest)" in proto


def test_both_kubelet_stubs_load_in_one_process() -> None:
    """Their descriptors are keyed by file name: two `api.proto` would collide."""
    from queuectl.agent.deviceplugin.v1beta1 import api_pb2
    from queuectl.agent.podresources.v1 import podresources_v1_pb2

    assert api_pb2.DESCRIPTOR.name != podresources_v1_pb2.DESCRIPTOR.name
