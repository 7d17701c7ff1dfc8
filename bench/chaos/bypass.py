"""Ways a user might get past the queue, tried on queued Jobs behind a full ClusterQueue.

Each attempt is either refused (with the API server's message) or accepted; either way the
invariant sampler watches what then runs, and the Job's labels must agree with its Workload.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial

from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

from bench.chaos.world import (
    FLAVOR,
    Obj,
    Rest,
    add_cluster_queue,
    job,
    make_queue,
    status_message,
    unfinished_jobs,
)
from queuectl.api import names
from queuectl.testenv.invariants import Sampler

OURS = f"/apis/{names.API_VERSION}"
TOP_CLASS = "chaos-top"


@dataclass
class BypassResult:
    attempts: dict[str, str] = field(default_factory=dict)  # what -> "refused: ..." | "accepted"
    disagreements: list[str] = field(default_factory=list)
    lost: list[str] = field(default_factory=list)
    violations: list[str] = field(default_factory=list)
    double: list[str] = field(default_factory=list)


def _attempt(out: BypassResult, what: str, call: Callable[[], object]) -> None:
    try:
        call()
        out.attempts[what] = "accepted"
    except ApiException as err:
        out.attempts[what] = f"refused {err.status}: {status_message(err)}"


def _workload_of(rest: Rest, namespace: str, job_name: str) -> Obj | None:
    for wl in rest.call("GET", f"{OURS}/namespaces/{namespace}/workloads")["items"]:
        refs = wl["metadata"].get("ownerReferences") or []
        if any(r.get("kind") == "Job" and r.get("name") == job_name for r in refs):
            found: Obj = wl
            return found
    return None


def _wait(what: str, probe: Callable[[], object], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not probe():
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(0.3)


def _disagreement(rest: Rest, namespace: str, job_name: str) -> str | None:
    """The Job's queue and priority labels against its Workload's, if they differ."""
    current = rest.call("GET", f"/apis/batch/v1/namespaces/{namespace}/jobs/{job_name}")
    labels = current["metadata"].get("labels") or {}
    wl = _workload_of(rest, namespace, job_name)
    if wl is None:
        return f"{job_name}: no Workload"
    spec = wl.get("spec") or {}
    pairs = (
        ("queue", labels.get(names.LABEL_QUEUE_NAME), spec.get("queueName")),
        ("priority class", labels.get(names.LABEL_PRIORITY_CLASS), spec.get("priorityClassName")),
    )
    for what, label, in_workload in pairs:
        if label != in_workload:
            return f"{job_name}: {what} label {label!r}, Workload says {in_workload!r}"
    return None


def attempt_bypasses(
    rest: Rest, api: k8s.ApiClient, namespace: str, drain_s: float
) -> BypassResult:
    """Fill queue `lq` (8 GPUs), queue four Jobs behind it, try every bypass, watch, drain."""
    out = BypassResult()
    queue = make_queue(rest, namespace, 8)
    add_cluster_queue(rest, namespace, f"{queue.cluster_queue}-b", 8, "qb")
    forge_cq = f"{queue.cluster_queue}-f"  # apart, so a forged admission blocks no other attempt
    add_cluster_queue(rest, namespace, forge_cq, 8, "qf")
    rest.apply_all(
        (
            f"{OURS}/workloadpriorityclasses",
            {
                "apiVersion": names.API_VERSION,
                "kind": "WorkloadPriorityClass",
                "metadata": {"name": TOP_CLASS},
                "value": 1_000_000,
            },
        )
    )
    jobs_path = f"/apis/batch/v1/namespaces/{namespace}/jobs"
    sampler = Sampler(api, [namespace]).start()
    try:
        rest.apply_all((jobs_path, job("filler", namespace, "lq", gpus=8, runs_for="20s")))
        _wait("the filler to run", lambda: _admitted(rest, namespace, "filler"), 90)
        queued = {
            "scale": job("scale", namespace, "lq", gpus=2, completions=8),
            "move": job("move", namespace, "lq"),
            "prio": job("prio", namespace, "lq"),
            "sneak": job("sneak", namespace, "lq"),
        }
        rest.apply_all(*((jobs_path, body) for body in queued.values()))
        for name in queued:
            _wait(f"{name}'s Workload", partial(_workload_of, rest, namespace, name), 60)

        def patch(name: str, body: Obj) -> Callable[[], object]:
            return lambda: rest.call("PATCH", f"{jobs_path}/{name}", body, patch=True)

        _attempt(out, "scale-up", patch("scale", {"spec": {"parallelism": 8}}))
        _attempt(
            out, "relabel", patch("move", {"metadata": {"labels": {names.LABEL_QUEUE_NAME: "qb"}}})
        )
        top = {"metadata": {"labels": {names.LABEL_PRIORITY_CLASS: TOP_CLASS}}}
        _attempt(out, "priority-label", patch("prio", top))
        _attempt(out, "unsuspend", patch("sneak", {"spec": {"suspend": False}}))
        _attempt(out, "forged-workload", lambda: _forge(rest, namespace, forge_cq))
        time.sleep(5)  # what the controller does with each, while the queue is still full
        names_ = ["filler", *queued]
        for name in queued:
            if (d := _disagreement(rest, namespace, name)) is not None:
                out.disagreements.append(d)
        if not out.attempts["scale-up"].startswith("refused"):
            # Accepted: the Workload must follow (8 pods x 2 GPUs, more than the queue's 8 can
            # ever hold, so it waits with ExceedsMaxQuota), never run the old admission's way.
            # Scaled back within the queue, it must then run and finish like any other Job.
            if (d := _resized_and_waiting(rest, namespace, "scale", pods=8)) is not None:
                out.disagreements.append(d)
            patch("scale", {"spec": {"parallelism": 4}})()
        deadline = time.monotonic() + drain_s
        out.lost = unfinished_jobs(rest, namespace, names_)
        while out.lost and time.monotonic() < deadline:
            time.sleep(1.0)
            out.lost = unfinished_jobs(rest, namespace, names_)
        for name in queued:
            if (
                d := _disagreement(rest, namespace, name)
            ) is not None and d not in out.disagreements:
                out.disagreements.append(d)
    finally:
        sampler.stop()
    out.violations = sampler.findings()
    out.double = sorted(sampler.history.double_admitted)
    return out


def _resized_and_waiting(rest: Rest, namespace: str, job_name: str, *, pods: int) -> str | None:
    """None when the Job's Workload asks for `pods` pods and waits as ExceedsMaxQuota."""
    wl = _workload_of(rest, namespace, job_name) or {}
    counts = [ps.get("count") for ps in (wl.get("spec") or {}).get("podSets") or ()]
    reserved: Obj = next(
        (
            c
            for c in (wl.get("status") or {}).get("conditions") or ()
            if c.get("type") == names.COND_QUOTA_RESERVED
        ),
        {},
    )
    if counts != [pods] or reserved.get("reason") != names.REASON_EXCEEDS_MAX_QUOTA:
        return (
            f"{job_name}: scaled to {pods} pods, its Workload asks {counts} and waits with "
            f"{reserved.get('reason')!r} (expected ExceedsMaxQuota)"
        )
    return None


def _admitted(rest: Rest, namespace: str, job_name: str) -> bool:
    wl = _workload_of(rest, namespace, job_name)
    return bool(wl and (wl.get("status") or {}).get("admission"))


def _forge(rest: Rest, namespace: str, cluster_queue: str) -> None:
    """A Workload nobody queued, then a status write claiming 32 GPUs of admission."""
    path = f"{OURS}/namespaces/{namespace}/workloads"
    template = job("forged", namespace, "lq", gpus=8)["spec"]["template"]
    rest.create(
        path,
        {
            "apiVersion": names.API_VERSION,
            "kind": "Workload",
            "metadata": {"name": "forged", "namespace": namespace},
            "spec": {
                "queueName": "qf",
                "podSets": [{"name": "main", "count": 4, "template": template}],
            },
        },
    )
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    condition = {"status": "True", "reason": "Admitted", "message": "", "lastTransitionTime": now}
    rest.call(
        "PATCH",
        f"{path}/forged/status",
        {
            "status": {
                "admission": {
                    "clusterQueue": cluster_queue,
                    "podSetAssignments": [
                        {
                            "name": "main",
                            "count": 4,
                            "flavors": {names.GPU_RESOURCE: FLAVOR},
                            "resourceUsage": {names.GPU_RESOURCE: "32"},
                        }
                    ],
                },
                "conditions": [
                    {**condition, "type": names.COND_QUOTA_RESERVED},
                    {**condition, "type": names.COND_ADMITTED},
                ],
            }
        },
        patch=True,
    )
