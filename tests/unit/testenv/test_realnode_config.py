"""The real node's settings, read without starting anything: each line here once broke a start."""

from __future__ import annotations

import io
import json
import tarfile
from pathlib import Path

import pytest
import yaml

from queuectl.cli import main as cli
from queuectl.testenv import components as comp
from queuectl.testenv.build import Binaries
from queuectl.testenv.nodeconfig import cni_conflist, containerd_config, kubelet_config
from queuectl.testenv.ociarchive import single_binary_image
from queuectl.testenv.realnode import RealNode

NODE = RealNode(
    name="real-0",
    netns="qctl-abc123-0",
    host_if="qhabc1230",
    node_if="qnabc1230",
    host_ip="10.200.7.1",
    node_ip="10.200.7.2",
    pod_cidr="10.244.7.0/24",
    cgroup="queuectl-abc123-0",
    dir="/state/nodes/real-0",
)


def test_containerd_lets_runc_start_where_negative_oom_scores_are_refused() -> None:
    config = containerd_config(NODE, Path("/cni/bin"), Path("/cni/net.d"), "localhost/p:v1")
    # Without it the sandbox's oom_score_adj -998 fails every pod here with runc's
    # "can't get final child's PID from pipe: EOF".
    assert "restrict_oom_score_adj = true" in config
    assert 'sandbox_image = "localhost/p:v1"' in config
    assert 'address = "/state/nodes/real-0/containerd/containerd.sock"' in config
    assert "SystemdCgroup = false" in config


def test_kubelet_runs_on_cgroup_v1_under_the_nodes_own_cgroup() -> None:
    config = yaml.safe_load(kubelet_config(NODE))
    assert config["failCgroupV1"] is False  # v1.35+ refuses cgroup v1 hosts by default
    assert config["cgroupRoot"] == "/queuectl-abc123-0"  # teardown kills what lives there
    assert config["podCIDR"] == NODE.pod_cidr
    assert config["healthzBindAddress"] == NODE.node_ip


def test_pods_get_addresses_from_the_nodes_own_subnet() -> None:
    bridge = json.loads(cni_conflist(NODE))["plugins"][0]
    assert bridge["type"] == "bridge"
    assert bridge["ipam"]["ranges"] == [[{"subnet": "10.244.7.0/24"}]]


@pytest.mark.parametrize(
    ("gateway", "expected"),
    [
        (
            None,
            {
                "--bind-address=127.0.0.1",
                "--endpoint-reconciler-type=none",
                "--enable-aggregator-routing=false",
            },
        ),
        (
            "10.200.7.1",
            {
                "--bind-address=0.0.0.0",
                "--advertise-address=10.200.7.1",
                "--endpoint-reconciler-type=lease",
                "--enable-aggregator-routing=true",
            },
        ),
    ],
)
def test_the_api_server_opens_to_real_nodes_only_when_there_are_some(
    tmp_path: Path, gateway: str | None, expected: set[str]
) -> None:
    argv = comp.apiserver_argv(
        Binaries(tmp_path),
        comp.Layout(tmp_path),
        comp.Ports(1, 2, 3, 4, 5, 6),
        node_gateway=gateway,
    )
    assert expected <= set(argv)


def test_a_binary_becomes_the_same_importable_image_every_time(tmp_path: Path) -> None:
    binary = tmp_path / "pause"
    binary.write_bytes(b"\x7fELF not really")
    first = single_binary_image(binary, "localhost/q/pause:v1", "/pause", tmp_path / "a.tar")
    again = single_binary_image(binary, "localhost/q/pause:v1", "/pause", tmp_path / "b.tar")
    assert first == again
    with tarfile.open(tmp_path / "a.tar") as archive:
        index = json.load(archive.extractfile("index.json") or io.BytesIO())
        names = archive.getnames()
    assert index["manifests"][0]["digest"] == first
    assert (
        index["manifests"][0]["annotations"]["io.containerd.image.name"] == "localhost/q/pause:v1"
    )
    assert "oci-layout" in names


def test_dev_up_refuses_a_negative_number_of_real_nodes(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        cli.main(["dev", "up", "--real-nodes", "-1"])
    err = capsys.readouterr().err
    assert "--real-nodes: -1: a whole number from 0 to" in err
