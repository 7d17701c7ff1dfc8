"""Which pod holds which GPU, how much it uses it, and the idle policy, on the real node.

The real node's kubelet allocates emulated GPUs from the agent's device plugin (an 8 x H100
HGX; the emulator's script runs a process at 97 % on GPU 0 and one at 1 % on GPU 1, the clock
held at t=10 s). The agent asks the kubelet's PodResources API which container holds which
GPU, joins it with NVML's figures and reports on the Node every 2 s; the controller folds the
reports into each Workload's status. The ClusterQueue's idle policy (under 5 % for 10 s:
Requeue) leaves the job on the working GPU alone and flags, preempts and requeues the one on
the idle GPU.

Attribution is by device (docs/design/gpu-use.md): the scripted processes are not the pods'
processes (they are the emulator's, with made-up host PIDs); the GPU a pod's container was
given is what makes its figures the pod's. The first job is started, and running, before the
second: the plugin's preferred allocation gives it GPU 0, the busy one.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from e2e.harness import (
    ControllerProcess,
    apply,
    cluster_queue,
    condition,
    get,
    gpu_job,
    is_true,
    local_queue,
    running_controller,
    running_pods,
    wait_for,
    workload_of,
)
from queuectl.agent.scripted import ScriptedReader
from queuectl.api import gpuuse, names
from queuectl.cli._devgpus import SCENARIOS, start_gpu_agent
from queuectl.testenv import ControlPlane, eventually
from queuectl.testenv.build import ensure_binaries
from queuectl.testenv.nodebuild import ensure_node_binaries
from queuectl.testenv.nodeconfig import REAL_NODE_LABEL
from queuectl.testenv.ociarchive import single_binary_image
from queuectl.testenv.realnode import load_image, recorded

pytestmark = [pytest.mark.cluster, pytest.mark.real_node]

HGX_H100 = SCENARIOS / "hgx-h100.yaml"
IMAGE = "localhost/queuectl/sleeper:v1"  # the node's pause binary: runs until stopped
NS = "gpu-use"


def uuids() -> list[str]:
    """The emulated node's GPU UUIDs by index (both readers name GPUs alike for one file)."""
    return ScriptedReader.from_scenario(yaml.safe_load(HGX_H100.read_text()), time.time).uuids()


@pytest.fixture(scope="module")
def plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    work = tmp_path_factory.mktemp("gpuuse")
    cp = ControlPlane(work, name="gpuuse", binaries=ensure_binaries(), real_nodes=1)
    try:
        cp.start()
        (node,) = recorded(work)
        archive = work / "images" / "sleeper.tar"
        single_binary_image(ensure_node_binaries().path("pause"), IMAGE, "/sleeper", archive)
        load_image(node, archive)
        clock = work / "emu-clock"
        clock.write_text("10")  # GPU 0 busy, GPU 1 idle, before the script's XID at 120 s
        start_gpu_agent(
            cp,
            node.name,
            HGX_H100,
            clock_file=clock,
            pod_resources_socket=node.pod_resources_socket,
            extra_args=["--gpu-use-report-seconds", "2"],
        )
        yield cp
    finally:
        cp.stop()


@pytest.fixture(scope="module")
def controller(
    plane: ControlPlane, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ControllerProcess]:
    with running_controller(plane, tmp_path_factory.mktemp("controller")) as proc:
        yield proc


def real_node_job(name: str) -> dict[str, Any]:
    job = gpu_job(name, NS, "lq", gpus=1)
    container = job["spec"]["template"]["spec"]["containers"][0]
    container.update(image=IMAGE, imagePullPolicy="Never")
    return job


def report(plane: ControlPlane, node: str) -> gpuuse.UseReport | None:
    text = (get(plane, "node", node)["metadata"].get("annotations") or {}).get(
        names.ANNOTATION_GPU_USE
    )
    return gpuuse.decode(text) if text else None


def gpu_of(plane: ControlPlane, node: str, pod: str) -> tuple[str, ...] | None:
    found = report(plane, node)
    held = [c.gpus for c in (found.containers if found else ()) if c.pod == pod]
    return held[0] if held else None


def events_of(plane: ControlPlane, name: str) -> dict[str, str]:
    """Reason -> latest message of the Events about object `name` in the test's namespace."""
    found = json.loads(plane.kubectl("get", "events", "-n", NS, "-o", "json").stdout)["items"]
    return {
        str(e.get("reason")): str(e.get("message") or e.get("note") or "")
        for e in found
        if (e.get("involvedObject") or e.get("regarding") or {}).get("name") == name
    }


def usage(plane: ControlPlane, job: str) -> dict[str, Any]:
    wl = workload_of(plane, NS, job) or {}
    return dict((wl.get("status") or {}).get("gpuUsage") or {})


def test_a_working_job_is_left_alone_and_an_idle_one_is_flagged_then_requeued(
    plane: ControlPlane, controller: ControllerProcess
) -> None:
    (node,) = recorded(plane.work_dir)
    gpus = uuids()
    eventually(
        lambda: plane.kubectl(
            "get", "node", node.name, "-o", "jsonpath={.status.allocatable.nvidia\\.com/gpu}"
        ).stdout.strip(),
        lambda n: n == "8",
        timeout=120,
        what=f"the kubelet advertises nvidia.com/gpu: 8 (logs/agent-{node.name}.log)",
    )
    plane.kubectl("create", "namespace", NS)
    flavor = {
        "apiVersion": names.API_VERSION,
        "kind": "ResourceFlavor",
        "metadata": {"name": "emulated-h100"},
        "spec": {"nodeLabels": {REAL_NODE_LABEL: "true"}},
    }
    policy = {"thresholdPercent": 5, "windowSeconds": 10, "action": "Requeue"}
    apply(
        plane,
        flavor,
        cluster_queue("cq-gpu-use", NS, {"emulated-h100": 8}, idlePolicy=policy),
        local_queue("lq", NS, "cq-gpu-use"),
    )

    apply(plane, real_node_job("worker"))
    [worker_pod] = wait_for(
        "the worker's pod running", lambda: running_pods(plane, NS, "worker"), 120
    )
    worker_gpus = wait_for(
        "the worker in the agent's report",
        lambda: gpu_of(plane, node.name, worker_pod["metadata"]["name"]),
        60,
    )
    assert worker_gpus == (gpus[0],)  # the busy GPU: the plugin packs from index 0

    apply(plane, real_node_job("idler"))
    [idler_pod] = wait_for("the idler's pod running", lambda: running_pods(plane, NS, "idler"), 120)
    idler_gpus = wait_for(
        "the idler in the agent's report",
        lambda: gpu_of(plane, node.name, idler_pod["metadata"]["name"]),
        60,
    )
    assert idler_gpus == (gpus[1],)

    flagged = wait_for(
        "the idler flagged GPUIdle",
        lambda: (w := workload_of(plane, NS, "idler")) and is_true(w, names.COND_GPU_IDLE) and w,
        90,
    )
    said_idle = condition(flagged, names.COND_GPU_IDLE) or {}
    assert "under the ClusterQueue's idle threshold of 5%" in str(said_idle.get("message"))
    idler_wl = flagged["metadata"]["name"]
    said = wait_for(
        "the idler preempted and requeued (its Events)",
        lambda: (
            (e := events_of(plane, idler_wl))
            and {names.EVENT_GPU_IDLE, names.EVENT_PREEMPTED, names.EVENT_REQUEUED} <= set(e)
            and e
        ),
        120,
    )
    assert "idle policy Requeue" in said[names.EVENT_PREEMPTED], said
    wait_for(
        "the requeued idler admitted and running again",
        lambda: [
            p
            for p in running_pods(plane, NS, "idler")
            if p["metadata"]["name"] != idler_pod["metadata"]["name"]
        ],
        120,
    )

    worker = workload_of(plane, NS, "worker")
    assert worker is not None and not is_true(worker, names.COND_GPU_IDLE)
    assert not is_true(worker, names.COND_PREEMPTED) and is_true(worker, names.COND_ADMITTED)
    worker_use = usage(plane, "worker")
    assert worker_use["utilizationPercent"] >= 90 and worker_use["gpuSeconds"] > 0, worker_use
    assert worker_use["gpus"] == 1

    metrics = controller.metrics()
    line = next(
        (
            row
            for row in metrics.splitlines()
            if row.startswith("queuectl_workload_gpu_utilization_ratio")
            and f'uuid="{gpus[0]}"' in row
        ),
        "",
    )
    assert (
        f'workload="{worker["metadata"]["name"]}"' in line and 'cluster_queue="cq-gpu-use"' in line
    ), line
