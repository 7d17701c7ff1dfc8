"""What a job is charged never falls below what its pods run, whatever its template says about
GPU sharing.

`gpu.queuectl.io/gpu-resource` on a pod template records which device queuectl put in place of
`nvidia.com/gpu` when it admitted the pod set to a MIG flavor; reading the template back, the
device is named `nvidia.com/gpu` again. A template on which queuectl did not do that rename
(a container still asks for `nvidia.com/gpu`, or the "device" is no NVIDIA stand-in at all) is
read as written: renaming it would merge two resources into one, the smaller winning.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from queuectl import convert
from queuectl.api import gpushare, names
from queuectl.jobs.batch import BatchJob

GPU = names.GPU_RESOURCE
MIG = "nvidia.com/mig-3g.40gb"
PODS = 4


def job(containers: list[dict[str, Any]], device: str | None) -> dict[str, Any]:
    meta: dict[str, Any] = {}
    if device is not None:
        meta["annotations"] = {names.ANNOTATION_GPU_RESOURCE: device}
    return {
        "metadata": {"name": "train", "namespace": "team-a", "uid": "u"},
        "spec": {
            "suspend": True,
            "parallelism": PODS,
            "completions": PODS,
            "template": {"metadata": meta, "spec": {"containers": containers}},
        },
    }


def gpu_container(requests: dict[str, str], limits: dict[str, str] | None = None) -> Any:
    resources: dict[str, Any] = {"requests": requests}
    if limits is not None:
        resources["limits"] = limits
    return {"name": "c", "image": "x", "resources": resources}


def charged(obj: dict[str, Any]) -> dict[str, int]:
    """What the Workload spec asks for, per pod: what quota is charged."""
    [ps] = BatchJob().workload_spec(obj)["podSets"]
    assert ps["count"] == PODS
    return convert.pod_requests(ps["template"]["spec"])


def covers(charge: dict[str, int], running: dict[str, int]) -> bool:
    """Every resource a pod runs is charged at least as much; NVIDIA devices count together
    (a MIG slice admitted in place of a GPU is charged as that GPU)."""

    def nvidia(req: dict[str, int]) -> int:
        return sum(v for k, v in req.items() if k.startswith("nvidia.com/"))

    rest = {k: v for k, v in running.items() if not k.startswith("nvidia.com/")}
    return nvidia(charge) >= nvidia(running) and all(charge.get(k, 0) >= v for k, v in rest.items())


CASES = {
    # The API server stores resource keys sorted: nvidia.com/gpu comes before rdma/hca.
    "finding: an RDMA device named as the stand-in, 8 GPUs per pod": (
        [gpu_container({GPU: "8", "rdma/hca": "1"})],
        "rdma/hca",
        {GPU: 8, "rdma/hca": 1},
    ),
    "the same with the RDMA device written first": (
        [gpu_container({"rdma/hca": "1", GPU: "8"})],
        "rdma/hca",
        {GPU: 8, "rdma/hca": 1},
    ),
    "a MIG slice named while the container still asks for nvidia.com/gpu": (
        [gpu_container({GPU: "8", MIG: "1"})],
        MIG,
        {GPU: 8, MIG: 1},
    ),
    "nvidia.com/gpu in limits only, the stand-in in requests": (
        [gpu_container({MIG: "1"}, limits={GPU: "8"})],
        MIG,
        {GPU: 8, MIG: 1},
    ),
    "one container asks for GPUs, another for the named device": (
        [gpu_container({GPU: "8"}), {**gpu_container({MIG: "1"}), "name": "side"}],
        MIG,
        {GPU: 8, MIG: 1},
    ),
    "cpu named as the stand-in: CPUs are no GPUs": (
        [gpu_container({"cpu": "64", GPU: "2"})],
        "cpu",
        {"cpu": 64_000, GPU: 2},
    ),
    "memory named as the stand-in, no GPU asked for": (
        [gpu_container({"memory": "1Gi"})],
        "memory",
        {"memory": 1024**3},
    ),
    "a template queuectl renamed to a MIG slice reads as one GPU per pod": (
        [gpu_container({MIG: "1", "cpu": "2"}, limits={MIG: "1"})],
        MIG,
        {GPU: 1, "cpu": 2000},
    ),
    "no annotation: the template as written": ([gpu_container({GPU: "8"})], None, {GPU: 8}),
}


@pytest.mark.parametrize(("containers", "device", "per_pod"), CASES.values(), ids=list(CASES))
def test_the_charge_covers_what_the_pods_run(
    containers: list[dict[str, Any]], device: str | None, per_pod: dict[str, int]
) -> None:
    obj = job(containers, device)
    assert charged(obj) == per_pod
    assert covers(charged(obj), convert.pod_requests(obj["spec"]["template"]["spec"]))


def test_a_template_not_renamed_by_queuectl_keeps_its_annotation_and_requests() -> None:
    template = job([gpu_container({GPU: "8", "rdma/hca": "1"})], "rdma/hca")["spec"]["template"]
    assert gpushare.stand_in(template) is None
    assert gpushare.original(template) == template


def test_a_renamed_template_reads_back_as_the_user_wrote_it() -> None:
    template = job([gpu_container({MIG: "1"})], MIG)["spec"]["template"]
    assert gpushare.stand_in(template) == MIG
    back = gpushare.original(template)
    assert back["spec"]["containers"][0]["resources"] == {"requests": {GPU: "1"}}
    assert "annotations" not in back["metadata"]


RESOURCES = st.sampled_from([GPU, MIG, "nvidia.com/mig-1g.10gb", "rdma/hca", "cpu"])
REQUESTS = st.dictionaries(RESOURCES, st.integers(1, 16).map(str), max_size=3)


@settings(max_examples=300, deadline=None)
@given(
    parts=st.lists(st.tuples(REQUESTS, st.none() | REQUESTS), min_size=1, max_size=3),
    device=st.none() | RESOURCES | st.just("memory"),
)
def test_whatever_the_template_says_the_charge_covers_what_runs(
    parts: list[tuple[dict[str, str], dict[str, str] | None]], device: str | None
) -> None:
    containers = [{**gpu_container(r, lim), "name": f"c{i}"} for i, (r, lim) in enumerate(parts)]
    obj = job(containers, device)
    assert covers(charged(obj), convert.pod_requests(obj["spec"]["template"]["spec"]))
