"""batch/v1 Job: one pod set (`main`) of `parallelism` pods, suspended until admitted."""

from __future__ import annotations

import copy
import hashlib
from collections.abc import Mapping, Sequence
from typing import Any, Final

from queuectl.api import gpushare, names
from queuectl.controller.jobs.base import Finished, PodSetPlacement
from queuectl.controller.kube import JOBS, Obj, Resource

POD_SET: Final = "main"
_MAX_LABEL_VALUE: Final = 63
_AFFINITY_KEY: Final = "requiredDuringSchedulingIgnoredDuringExecution"


def workload_name_for(prefix: str, name: str, uid: str) -> str:
    """`<prefix>-<name>-<hash>`, cut to a label value: the hash of the uid keeps a recreated
    job with the same name from ever meeting its predecessor's Workload."""
    digest = hashlib.sha256(f"{prefix}/{name}/{uid}".encode()).hexdigest()[:8]
    head = f"{prefix}-{name}"[: _MAX_LABEL_VALUE - len(digest) - 1].rstrip("-.")
    return f"{head}-{digest}"


def pod_count(job: Obj) -> int:
    """Pods running at once: parallelism (default 1), never more than completions."""
    spec = job.get("spec") or {}
    parallelism = spec.get("parallelism")
    count = 1 if parallelism is None else int(parallelism)
    completions = spec.get("completions")
    if completions is not None:
        count = min(count, int(completions))
    return count


def topology_request(template: Obj) -> dict[str, str] | None:
    annotations = (template.get("metadata") or {}).get("annotations") or {}
    req = {
        "required": annotations.get(names.ANNOTATION_PODSET_REQUIRED_TOPOLOGY),
        "preferred": annotations.get(names.ANNOTATION_PODSET_PREFERRED_TOPOLOGY),
    }
    return {k: v for k, v in req.items() if v} or None


def inject(pod_spec: Obj, placement: PodSetPlacement) -> dict[str, Any]:
    """The affinity and tolerations fields of `pod_spec` with the placement added: every
    original node selector term gets the flavor's and the domain's requirements (terms are
    ORed, requirements inside one are ANDed, so each term must carry them)."""
    extra: list[dict[str, Any]] = [
        {"key": k, "operator": "In", "values": [v]}
        for k, v in sorted(placement.node_labels.items())
    ]
    extra += [
        {"key": k, "operator": "In", "values": sorted(vs)}
        for k, vs in sorted(placement.domain.items())
    ]
    original = ((pod_spec.get("affinity") or {}).get("nodeAffinity") or {}).get(_AFFINITY_KEY)
    terms = copy.deepcopy((original or {}).get("nodeSelectorTerms") or [{}])
    for term in terms:
        term["matchExpressions"] = list(term.get("matchExpressions") or []) + extra
    out: dict[str, Any] = {}
    if extra:
        out["affinity"] = {"nodeAffinity": {_AFFINITY_KEY: {"nodeSelectorTerms": terms}}}
    tolerations = list(pod_spec.get("tolerations") or [])
    for tol in placement.tolerations:
        if dict(tol) not in tolerations:
            tolerations.append(dict(tol))
    if placement.tolerations:
        out["tolerations"] = tolerations
    if placement.gpu_resource:
        out["containers"] = gpushare.rename_containers(
            pod_spec, names.RESOURCE_GPU, placement.gpu_resource
        )
    return out


def restore(pod_spec: Obj) -> dict[str, Any]:
    """The affinity and tolerations fields as the original pod spec had them (null deletes)."""
    original = ((pod_spec.get("affinity") or {}).get("nodeAffinity") or {}).get(_AFFINITY_KEY)
    return {
        "affinity": {"nodeAffinity": {_AFFINITY_KEY: copy.deepcopy(original)}},
        "tolerations": copy.deepcopy(pod_spec.get("tolerations")),
    }


class BatchJobAdapter:
    """The `JobAdapter` for batch/v1 Jobs."""

    resource: Resource = JOBS

    def queue_name(self, job: Obj) -> str | None:
        labels = (job.get("metadata") or {}).get("labels") or {}
        value = labels.get(names.LABEL_QUEUE_NAME)
        return str(value) if value else None

    def workload_name(self, job: Obj) -> str:
        meta = job["metadata"]
        return workload_name_for("job", meta["name"], meta.get("uid", ""))

    def workload_spec(self, job: Obj) -> dict[str, Any]:
        meta, spec = job["metadata"], job.get("spec") or {}
        labels = meta.get("labels") or {}
        template = copy.deepcopy(gpushare.original(spec.get("template") or {}))
        pod_set: dict[str, Any] = {"name": POD_SET, "count": pod_count(job), "template": template}
        topo = topology_request(template)
        if topo:
            pod_set["topologyRequest"] = topo
        out: dict[str, Any] = {"podSets": [pod_set], "queueName": self.queue_name(job) or ""}
        if labels.get(names.LABEL_PRIORITY_CLASS):
            out["priorityClassName"] = labels[names.LABEL_PRIORITY_CLASS]
        max_exec = labels.get(names.LABEL_MAX_EXEC_TIME, "")
        if max_exec.isdigit():
            out["maximumExecutionTimeSeconds"] = int(max_exec)
        return out

    def pod_priority_class(self, job: Obj) -> str | None:
        pc = (((job.get("spec") or {}).get("template") or {}).get("spec") or {}).get(
            "priorityClassName"
        )
        return str(pc) if pc else None

    def is_suspended(self, job: Obj) -> bool:
        return bool((job.get("spec") or {}).get("suspend"))

    def finished(self, job: Obj) -> Finished | None:
        for cond in (job.get("status") or {}).get("conditions") or ():
            if cond.get("status") != "True":
                continue
            if cond.get("type") == "Complete":
                return Finished(
                    True,
                    names.REASON_FINISHED_SUCCEEDED,
                    cond.get("message") or "Job finished successfully",
                )
            if cond.get("type") == "Failed":
                return Finished(
                    False,
                    names.REASON_FINISHED_FAILED,
                    cond.get("message") or cond.get("reason") or "Job failed",
                )
        return None

    def pods_gone(self, job: Obj) -> bool:
        status = job.get("status") or {}
        return not status.get("active") and not status.get("terminating")

    def can_restore(self, job: Obj) -> bool:
        # The API server lets scheduling directives change only on a suspended Job that has
        # not started; the Job controller clears startTime once it has suspended it.
        return self.is_suspended(job) and not (job.get("status") or {}).get("startTime")

    def run_patch(
        self, job: Obj, pod_sets: Sequence[Obj], placements: Sequence[PodSetPlacement]
    ) -> dict[str, Any]:
        pod_spec = _pod_spec(pod_sets)
        by_name = {p.name: p for p in placements}
        injected = inject(pod_spec, by_name.get(POD_SET, PodSetPlacement(POD_SET)))
        patch: dict[str, Any] = {"spec": {"suspend": False}}
        if injected:
            patch["spec"]["template"] = {"spec": injected}
        device = by_name.get(POD_SET, PodSetPlacement(POD_SET)).gpu_resource
        if device:
            annotations = {names.ANNOTATION_GPU_RESOURCE: device}
            patch["spec"]["template"]["metadata"] = {"annotations": annotations}
        return patch

    def suspend_patch(self, job: Obj) -> dict[str, Any]:
        return {"spec": {"suspend": True}}

    def restore_patch(self, job: Obj, pod_sets: Sequence[Obj]) -> dict[str, Any] | None:
        wanted = restore(_pod_spec(pod_sets))
        current = (job.get("spec") or {}).get("template", {}).get("spec") or {}
        now_aff = ((current.get("affinity") or {}).get("nodeAffinity") or {}).get(_AFFINITY_KEY)
        want_aff = wanted["affinity"]["nodeAffinity"][_AFFINITY_KEY]
        renamed = gpushare.served_by((job.get("spec") or {}).get("template") or {})
        if (
            now_aff == want_aff
            and current.get("tolerations") == wanted["tolerations"]
            and renamed is None
        ):
            return None
        template: dict[str, Any] = {"spec": wanted}
        if renamed is not None:
            wanted["containers"] = copy.deepcopy(_pod_spec(pod_sets).get("containers"))
            template["metadata"] = {"annotations": {names.ANNOTATION_GPU_RESOURCE: None}}
        return {"spec": {"template": template}}


def _pod_spec(pod_sets: Sequence[Mapping[str, Any]]) -> Obj:
    for ps in pod_sets:
        if ps.get("name") == POD_SET:
            spec: Obj = (ps.get("template") or {}).get("spec") or {}
            return spec
    return {}
