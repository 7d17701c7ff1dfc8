"""A pod set admitted to a flavor whose GPUs are MIG slices asks for the slice instead.

The Job is rewritten at admission (containers ask for the slice, the template names it), the
webhook and the drift check still read the shape the user wrote, and a requeue puts the user's
template back.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from queuectl.api import names
from queuectl.api.views import WorkloadView
from queuectl.controller.admission import placement
from queuectl.controller.watch import kube as k
from queuectl.controller.watch.kube import KubeError
from queuectl.controller.workloads.drift import admitted_pod_sets, drift
from queuectl.core import types as core
from queuectl.jobs.batch import BatchJob
from queuectl.jobs.shape import shape_changes
from tests.unit.controller.controller_fakes import ADMISSION, World, new_job, queued

ADAPTER = BatchJob()
MIG_3G = "nvidia.com/mig-3g.40gb"
GPU = names.GPU_RESOURCE
FLAVORS = {
    "h100-full": {"spec": {"nodeLabels": {"pool": "full"}}},
    "h100-mig-3g": {"spec": {"nodeLabels": {"pool": "mig"}, "gpuResource": MIG_3G}},
}


def inference_job() -> dict[str, Any]:
    container = {
        "name": "server",
        "resources": {
            "requests": {"nvidia.com/gpu": "1", "cpu": "2"},
            "limits": {"nvidia.com/gpu": "1"},
        },
    }
    return {
        "metadata": {
            "name": "infer",
            "namespace": "ns",
            "uid": "u",
            "labels": {names.LABEL_QUEUE_NAME: "lq"},
        },
        "spec": {"suspend": True, "template": {"spec": {"containers": [container]}}},
    }


def admitted_to(flavor: str) -> core.Admission:
    psa = core.PodSetAssignment(
        "main", 1, {"nvidia.com/gpu": flavor, "cpu": flavor}, {"nvidia.com/gpu": 1}
    )
    return core.Admission("q", (psa,))


def started(job: dict[str, Any], flavor: str) -> dict[str, Any]:
    """The Job after the controller's run patch (a merge patch, as the API server applies it)."""
    pod_sets = ADAPTER.workload_spec(job)["podSets"]
    patch = ADAPTER.run_patch(job, pod_sets, placement.placements(admitted_to(flavor), FLAVORS))
    template = patch["spec"].get("template", {})
    out = {**job, "spec": {**job["spec"], "suspend": False}}
    out["spec"]["template"] = {
        "metadata": {**job["spec"]["template"].get("metadata", {}), **template.get("metadata", {})},
        "spec": {**job["spec"]["template"]["spec"], **template.get("spec", {})},
    }
    return out


def test_a_job_admitted_to_a_mig_flavor_asks_for_the_slice() -> None:
    job = started(inference_job(), "h100-mig-3g")
    template = job["spec"]["template"]
    [container] = template["spec"]["containers"]
    assert container["resources"] == {
        "requests": {MIG_3G: "1", "cpu": "2"},
        "limits": {MIG_3G: "1"},
    }
    assert template["metadata"]["annotations"] == {names.ANNOTATION_GPU_RESOURCE: MIG_3G}
    assert template["spec"]["affinity"]["nodeAffinity"]


def test_a_job_admitted_to_a_whole_gpu_keeps_its_request() -> None:
    job = started(inference_job(), "h100-full")
    [container] = job["spec"]["template"]["spec"]["containers"]
    assert container["resources"]["requests"]["nvidia.com/gpu"] == "1"
    assert "metadata" not in job["spec"]["template"] or not job["spec"]["template"]["metadata"]


def test_the_renamed_job_still_has_the_shape_it_was_admitted_with() -> None:
    """Neither the webhook nor the drift check may read the slice as a user's change."""
    before = inference_job()
    after = started(before, "h100-mig-3g")
    assert shape_changes(ADAPTER, before, after) == []
    workload = {"spec": ADAPTER.workload_spec(before)}
    placed = placement.placements(admitted_to("h100-mig-3g"), FLAVORS)
    injected = admitted_pod_sets(ADAPTER, after, workload, placed)  # as the reconciler asks
    assert drift(ADAPTER.workload_spec(after), workload, injected) == []


def test_a_requeued_job_gets_the_users_request_back() -> None:
    before = inference_job()
    after = {**started(before, "h100-mig-3g")}
    after["spec"] = {**after["spec"], "suspend": True}
    pod_sets = ADAPTER.workload_spec(before)["podSets"]
    patch = ADAPTER.restore_patch(after, pod_sets)
    assert patch is not None
    template = patch["spec"]["template"]
    assert template["metadata"] == {"annotations": {names.ANNOTATION_GPU_RESOURCE: None}}
    assert template["spec"]["containers"] == before["spec"]["template"]["spec"]["containers"]


# --- an API server that refuses the rewrite (Kubernetes before 1.36) --------------------------
IMMUTABLE = (
    'Job.batch "train" is invalid: spec.template: Invalid value: {"Spec":{"Containers":'
    '[{"Resources":{}}]}}: field is immutable'
)


async def test_a_refused_rewrite_deactivates_instead_of_holding_quota_forever() -> None:
    """A 422 on the start patch would repeat on every retry while the Job holds its slice's
    quota and never starts: the Workload is deactivated and says why."""
    w = World()
    w.add(k.RESOURCE_FLAVORS, {"metadata": {"name": "h100-mig-3g"}, **FLAVORS["h100-mig-3g"]})
    patch_as_server = w.kube.patch

    async def refuse_renames(res: Any, name: str, patch: Any, *a: Any, **kw: Any) -> Any:
        if res == k.JOBS and MIG_3G in json.dumps(patch):
            raise KubeError(422, "Invalid", IMMUTABLE)
        return await patch_as_server(res, name, patch, *a, **kw)

    w.kube.patch = refuse_renames  # type: ignore[method-assign]
    key = await queued(w, new_job())
    mig = core.PodSetAssignment("main", 1, {GPU: "h100-mig-3g"}, {GPU: 8})

    assert await w.decisions().admit(key, core.Admission("cq", (mig,)))

    wl = w.workload()
    assert wl["spec"]["active"] is False and not WorkloadView(wl).holds_quota
    requeued = WorkloadView(wl).condition(names.COND_REQUEUED) or {}
    assert (requeued["status"], requeued["reason"]) == ("False", "GpuResourceRefused")
    assert "MutablePodResourcesForSuspendedJobs" in requeued["message"]
    assert "spec.template: field is immutable" in requeued["message"]
    assert "Containers" not in requeued["message"]  # not the whole template the server quoted
    job = w.job()
    assert job["spec"]["suspend"] is True
    assert job["spec"]["template"]["spec"]["containers"][0]["resources"]["requests"] == {GPU: "8"}


async def test_other_refusals_of_the_start_patch_are_not_read_as_the_gate() -> None:
    """No gpuResource in the placement: a 422 is the ordinary retried failure."""
    w = World()
    key = await queued(w, new_job())
    patch_as_server = w.kube.patch

    async def refuse_jobs(res: Any, name: str, patch: Any, *a: Any, **kw: Any) -> Any:
        if res == k.JOBS:
            raise KubeError(422, "Invalid", IMMUTABLE)
        return await patch_as_server(res, name, patch, *a, **kw)

    w.kube.patch = refuse_jobs  # type: ignore[method-assign]
    with pytest.raises(KubeError):
        await w.decisions().admit(key, ADMISSION)
    wl = w.workload()
    assert wl["spec"].get("active") is not False and WorkloadView(wl).holds_quota
