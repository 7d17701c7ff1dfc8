"""Which container holds which GPU: the kubelet's devices joined with NVML's samples (pure),
folded into one report per window, and published on the Node by the agent's pass."""

from __future__ import annotations

from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from queuectl import metrics
from queuectl.agent.gpuuse import ContainerDevices, GpuUse, UseWindow, join
from queuectl.agent.reader import GpuInfo, GpuProcess, GpuSample
from queuectl.agent.scripted import ManualClock, ScriptedReader
from queuectl.agent.shell import Agent, AgentConfig
from queuectl.api import gpuuse, names

GPU = names.GPU_RESOURCE
GPUS = [
    GpuInfo(i, f"GPU-{i}", "NVIDIA H100 80GB HBM3", 80 << 30, f"0000:0{i}:00.0") for i in (0, 1, 2)
]
SAMPLES = {
    "GPU-0": GpuSample(
        0,
        "GPU-0",
        utilization_ratio=0.97,
        memory_used_bytes=70 << 30,
        processes=(GpuProcess(4101, 70 << 30, 97),),
    ),
    "GPU-1": GpuSample(1, "GPU-1", utilization_ratio=0.01, memory_used_bytes=20 << 30),
    "GPU-2": GpuSample(2, "GPU-2", utilization_ratio=None),
}


def held(
    ns: str, pod: str, *ids: str, container: str = "main", resource: str = GPU
) -> ContainerDevices:
    return ContainerDevices(ns, pod, container, resource, ids)


def who(rows: list[GpuUse]) -> list[tuple[str, str, float | None]]:
    return [
        (r.uuid, f"{r.namespace}/{r.pod}/{r.container}" if r.held else "", r.utilization_ratio)
        for r in rows
    ]


@pytest.mark.parametrize(
    ("containers", "expected"),
    [
        pytest.param(
            [],
            [("GPU-0", "", 0.97), ("GPU-1", "", 0.01), ("GPU-2", "", None)],
            id="nobody holds a GPU: one row each, no pod",
        ),
        pytest.param(
            [held("team-a", "train-0", "GPU-0"), held("team-b", "idle-0", "GPU-1")],
            [
                ("GPU-0", "team-a/train-0/main", 0.97),
                ("GPU-1", "team-b/idle-0/main", 0.01),
                ("GPU-2", "", None),
            ],
            id="two pods, one GPU each: each gets its GPU's figures",
        ),
        pytest.param(
            [held("team-a", "big", "GPU-1", "GPU-0")],
            [
                ("GPU-0", "team-a/big/main", 0.97),
                ("GPU-1", "team-a/big/main", 0.01),
                ("GPU-2", "", None),
            ],
            id="one container with two GPUs: a row per GPU, in GPU order",
        ),
        pytest.param(
            [held("team-a", "p", "GPU-0::0"), held("team-a", "q", "GPU-0::1")],
            [
                ("GPU-0", "team-a/p/main", 0.97),
                ("GPU-0", "team-a/q/main", 0.97),
                ("GPU-1", "", 0.01),
                ("GPU-2", "", None),
            ],
            id="time-slicing replicas name their GPU: both holders get the whole GPU",
        ),
        pytest.param(
            [held("team-a", "nic", "mlx5_0", resource="rdma/ib"), held("team-a", "gone", "GPU-9")],
            [("GPU-0", "", 0.97), ("GPU-1", "", 0.01), ("GPU-2", "", None)],
            id="other resources and unknown UUIDs are left out",
        ),
    ],
)
def test_join_attributes_each_gpu_to_the_container_the_kubelet_gave_it_to(
    containers: list[ContainerDevices], expected: list[tuple[str, str, float | None]]
) -> None:
    assert who(join(containers, GPUS, SAMPLES)) == expected


def test_join_carries_memory_and_process_count() -> None:
    [row, *_] = join([held("a", "p", "GPU-0")], GPUS, SAMPLES)
    assert (row.memory_used_bytes, row.processes) == (70 << 30, 1)


def test_a_window_reports_each_containers_mean_use_and_peak_memory() -> None:
    """Three passes: the trainer works at 90 then 60 then 30 %; the idler holds two GPUs at
    1 % and 3 %; a pass where NVML gave no utilization adds nothing to the mean."""
    window = UseWindow(100.0)
    for util, mem in ((0.9, 10), (0.6, 30), (0.3, 20)):
        window.add(
            [
                GpuUse(0, "GPU-0", "a", "train", "main", util, mem),
                GpuUse(1, "GPU-1", "b", "idle", "main", 0.01, 5),
                GpuUse(2, "GPU-2", "b", "idle", "main", 0.03, 5),
                GpuUse(3, "GPU-3", "b", "idle", "main", None, None),
                GpuUse(4, "GPU-4"),
            ]
        )
    report = window.close(130.0)
    assert (report.start, report.end) == (100.0, 130.0)
    train, idle = report.containers
    assert (train.pod, train.gpus, train.memory_bytes) == ("train", ("GPU-0",), 30)
    assert train.utilization == pytest.approx(60.0)
    assert (idle.pod, idle.gpus, idle.memory_bytes) == ("idle", ("GPU-1", "GPU-2", "GPU-3"), 10)
    assert idle.utilization == pytest.approx(2.0)
    assert window.close(160.0) == gpuuse.UseReport(130.0, 160.0, ())


def test_the_report_survives_its_annotation_and_a_bad_one_says_what_is_wrong() -> None:
    report = gpuuse.UseReport(
        1.4, 61.6, (gpuuse.ContainerUse("a", "p", "main", ("GPU-0",), 42.25, 7 << 30),)
    )
    assert gpuuse.decode(gpuuse.encode(report)) == gpuuse.UseReport(
        1, 62, (gpuuse.ContainerUse("a", "p", "main", ("GPU-0",), 42.2, 7 << 30),)
    )  # whole seconds, as the Workload status keeps them
    for text, problem in (
        ("{", "not JSON"),
        ('{"v": 2}', '"v": 1'),
        ('{"v": 1, "from": 5, "to": 1, "c": []}', "before it starts"),
        ('{"v": 1, "from": 0, "to": 1, "c": [["a", "p"]]}', "container 0"),
        ('{"v": 1, "from": 0, "to": 1, "c": [["a", "p", "c", ["G"], "x", 0]]}', "util must be"),
    ):
        with pytest.raises(gpuuse.BadReport, match=problem):
            gpuuse.decode(text)


async def test_the_agent_publishes_one_report_per_window_and_labels_gpu_metrics_by_holder() -> None:
    """GPU 0 works at 80 % for a pod of team-a, GPU 1 idles for team-b's pod; with a 30 s
    window and 10 s passes the Node annotation changes on the fourth pass (30 s after the
    first, which opened the window), not before."""
    clock = ManualClock()
    reader = ScriptedReader.node("H100", 4, "nvswitch", clock=clock, seed="use")
    reader.utilization(clock.now, gpu=0, percent=80)
    uuids = [reader.device(i).uuid for i in range(4)]
    containers = [held("team-a", "train-0", uuids[0]), held("team-b", "idle-0", uuids[1])]

    async def devices() -> list[ContainerDevices]:
        return containers

    collector = metrics.GpuCollector()
    config = AgentConfig(node_name="gpu-0", poll_s=0, call_timeout_s=5, use_report_s=30)
    agent = Agent(reader, config, None, clock=clock, collector=collector, devices=devices)
    await agent.start()
    annotations = []
    for _ in range(4):
        clock.advance(10)
        result = await agent.run_pass(wait_s=0)
        annotations.append(result.desired.annotations[names.ANNOTATION_GPU_USE])
    assert annotations[:3] == [None, None, None] and annotations[3] is not None
    report = gpuuse.decode(annotations[3])
    assert report.end - report.start == 30
    assert [(c.pod, c.gpus, c.utilization) for c in report.containers] == [
        ("train-0", (uuids[0],), 80.0),
        ("idle-0", (uuids[1],), 0.0),
    ]

    registry = CollectorRegistry()
    registry.register(collector)
    base = {"node": "gpu-0", "model": "NVIDIA H100 80GB HBM3"}
    holder = {"namespace": "team-a", "pod": "train-0", "container": "main"}
    gpu0 = {**base, "gpu": "0", "uuid": uuids[0]}
    gpu2 = {**base, "gpu": "2", "uuid": uuids[2]}
    assert (
        registry.get_sample_value("queuectl_gpu_container_utilization_ratio", {**gpu0, **holder})
        == 0.8
    )
    assert registry.get_sample_value("queuectl_gpu_allocated", gpu0) == 1
    assert registry.get_sample_value("queuectl_gpu_allocated", gpu2) == 0


async def test_without_the_kubelets_answer_the_agent_goes_on_and_reports_nothing() -> None:
    clock = ManualClock()
    reader = ScriptedReader.node("H100", 2, "nvswitch", clock=clock, seed="use")

    async def devices() -> list[ContainerDevices]:
        raise FileNotFoundError("no kubelet socket")

    collector = metrics.GpuCollector()
    config = AgentConfig(node_name="gpu-0", poll_s=0, call_timeout_s=5, use_report_s=1)
    agent = Agent(reader, config, None, clock=clock, collector=collector, devices=devices)
    await agent.start()
    clock.advance(10)
    result = await agent.run_pass(wait_s=0)
    assert result.desired.annotations[names.ANNOTATION_GPU_USE] is None and result.gpu_use == ()
    assert not result.node_health.reason or result.node_health.healthy
    registry = CollectorRegistry()
    registry.register(collector)
    assert (
        registry.get_sample_value(
            "queuectl_gpu_utilization_ratio",
            {
                "node": "gpu-0",
                "gpu": "0",
                "uuid": reader.device(0).uuid,
                "model": "NVIDIA H100 80GB HBM3",
            },
        )
        == 0
    )
    assert "queuectl_gpu_allocated" not in {s.name for m in registry.collect() for s in m.samples}


async def test_the_client_lists_devices_over_the_kubelets_unix_socket(tmp_path: Path) -> None:
    """A PodResourcesLister served on a unix socket, as the kubelet serves it."""
    import grpc

    from queuectl.agent.podresources.client import PodResourcesUnavailable, list_devices
    from queuectl.agent.podresources.v1 import podresources_v1_pb2 as pb
    from queuectl.agent.podresources.v1 import podresources_v1_pb2_grpc as pb_grpc

    class Kubelet(pb_grpc.PodResourcesListerServicer):  # type: ignore[misc]
        async def List(self, request: object, context: object) -> pb.ListPodResourcesResponse:
            gpu = pb.ContainerDevices(resource_name=GPU, device_ids=["GPU-0", "GPU-1"])
            nic = pb.ContainerDevices(resource_name="rdma/ib", device_ids=["mlx5_0"])
            main = pb.ContainerResources(name="main", devices=[gpu, nic])
            side = pb.ContainerResources(name="sidecar")
            pod = pb.PodResources(name="train-0", namespace="team-a", containers=[main, side])
            return pb.ListPodResourcesResponse(pod_resources=[pod])

    socket = tmp_path / "kubelet.sock"
    with pytest.raises(PodResourcesUnavailable, match="no kubelet PodResources socket"):
        await list_devices(socket)
    server = grpc.aio.server()
    pb_grpc.add_PodResourcesListerServicer_to_server(Kubelet(), server)  # type: ignore[no-untyped-call]
    server.add_insecure_port(f"unix://{socket}")
    await server.start()
    try:
        assert await list_devices(socket) == [
            ContainerDevices("team-a", "train-0", "main", GPU, ("GPU-0", "GPU-1")),
            ContainerDevices("team-a", "train-0", "main", "rdma/ib", ("mlx5_0",)),
        ]
    finally:
        await server.stop(None)
