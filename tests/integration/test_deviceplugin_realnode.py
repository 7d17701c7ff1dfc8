"""The agent's device plugin on the real node: the real kubelet allocates emulated GPUs.

`queuectl agent --device-plugin` runs on the host beside the real node's kubelet, its NVML the
emulator (an 8 x H100 HGX, the unmodified nvidia-ml-py loading it through LD_LIBRARY_PATH), on
an emulated clock the test moves by rewriting a file. The kubelet's device manager is the real
one (registration, ListAndWatch, Allocate, allocatable on the Node); the container sees the
environment the plugin's Allocate answered.

The kubelet's device plugin directory is fixed at /var/lib/kubelet/device-plugins (no flag
moves it), so only one real kubelet per host can take plugins: two environments with real nodes
on one host at once would take the directory from each other.
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from queuectl.agent.scripted import ScriptedReader
from queuectl.cli._devgpus import SCENARIOS, start_gpu_agent
from queuectl.testenv import ControlPlane, eventually
from queuectl.testenv.build import ensure_binaries
from queuectl.testenv.nodeconfig import REAL_NODE_LABEL
from queuectl.testenv.ociarchive import single_binary_image
from queuectl.testenv.realnode import load_image, recorded

pytestmark = [pytest.mark.cluster, pytest.mark.real_node]

HGX_H100 = SCENARIOS / "hgx-h100.yaml"
ENV_IMAGE = "localhost/queuectl/printenv:v1"
# The container's whole job: print the variable the device plugin set, then exit.
PRINTENV_C = """\
#include <stdio.h>
#include <stdlib.h>
int main(void) {
    const char *v = getenv("NVIDIA_VISIBLE_DEVICES");
    printf("NVIDIA_VISIBLE_DEVICES=%s\\n", v ? v : "<unset>");
    return 0;
}
"""


def uuids() -> list[str]:
    """The emulated node's GPU UUIDs by index (both readers name GPUs alike for one file)."""
    return ScriptedReader.from_scenario(yaml.safe_load(HGX_H100.read_text()), time.time).uuids()


@pytest.fixture(scope="module")
def plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    work = tmp_path_factory.mktemp("dpnode")
    cp = ControlPlane(work, name="dpnode", binaries=ensure_binaries(), real_nodes=1)
    try:
        cp.start()
        (node,) = recorded(work)
        source, binary = work / "printenv.c", work / "printenv"
        source.write_text(PRINTENV_C)
        subprocess.run(["gcc", "-static", "-O2", "-o", str(binary), str(source)], check=True)
        archive = work / "images" / "printenv.tar"
        single_binary_image(binary, ENV_IMAGE, "/printenv", archive)
        load_image(node, archive)
        yield cp
    finally:
        cp.stop()


@pytest.fixture(scope="module")
def clock_file(plane: ControlPlane) -> Path:
    """The emulated clock (seconds since nvmlInit), started at t=10; GPU 3's XID 79 is at 120.
    The agent starts as `queuectl dev up --emulated-gpus` starts it."""
    (node,) = recorded(plane.work_dir)
    clock = plane.work_dir / "emu-clock"
    clock.write_text("10")
    start_gpu_agent(plane, node.name, HGX_H100, clock_file=clock)
    return clock


def allocatable_gpus(plane: ControlPlane, name: str) -> str:
    path = "jsonpath={.status.allocatable.nvidia\\.com/gpu}"
    return plane.kubectl("get", "node", name, "-o", path, check=False).stdout.strip()


def gpu_pod(name: str, gpus: int) -> str:
    return json.dumps(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name},
            "spec": {
                "nodeSelector": {REAL_NODE_LABEL: "true"},
                "restartPolicy": "Never",
                "containers": [
                    {
                        "name": "main",
                        "image": ENV_IMAGE,
                        "imagePullPolicy": "Never",
                        "resources": {"limits": {"nvidia.com/gpu": gpus}},
                    }
                ],
            },
        }
    )


def test_the_real_kubelet_allocates_two_emulated_gpus_and_withdraws_one_after_an_xid_79(
    plane: ControlPlane, clock_file: Path
) -> None:
    (node,) = recorded(plane.work_dir)
    gpus = uuids()
    eventually(
        lambda: allocatable_gpus(plane, node.name),
        lambda n: n == "8",
        timeout=120,
        what=f"the kubelet advertises nvidia.com/gpu: 8 (logs/agent-{node.name}.log)",
    )

    plane.kubectl("apply", "-f", "-", input=gpu_pod("two-gpus", 2))
    phase = eventually(
        lambda: plane.kubectl("get", "pod", "two-gpus", "-o", "jsonpath={.status.phase}").stdout,
        lambda p: p in ("Succeeded", "Failed"),
        timeout=120,
        what="the two-GPU pod to run and exit",
    )
    logs = plane.kubectl("logs", "two-gpus").stdout.strip()
    assert phase == "Succeeded", logs
    visible = logs.removeprefix("NVIDIA_VISIBLE_DEVICES=").split(",")
    # Two of the node's GPUs, by UUID; the plugin's preferred allocation packs low indexes.
    assert sorted(visible) == sorted(gpus[:2]), logs

    clock_file.write_text("130")  # past GPU 3's XID 79: the agent counts it unhealthy
    eventually(
        lambda: allocatable_gpus(plane, node.name),
        lambda n: n == "7",
        timeout=120,
        what="the kubelet withdraws the failed GPU (allocatable 7)",
    )
    capacity = plane.kubectl(
        "get", "node", node.name, "-o", "jsonpath={.status.capacity.nvidia\\.com/gpu}"
    ).stdout
    assert capacity == "8"  # still listed (Unhealthy), no longer allocatable
    taints = plane.kubectl("get", "node", node.name, "-o", "jsonpath={.spec.taints}").stdout
    assert "CriticalXid" in taints  # the agent's taint stays beside the withdrawal
