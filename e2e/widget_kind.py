"""Widget: a made-up job kind for tests, proving that adding a kind is one class and one
registration (docs/design/jobs.md). Two roles, as a leader/worker kind has: one `leader` pod
from spec.leaderTemplate and spec.workers pods from spec.workerTemplate; spec.suspend holds it.

Nothing runs a Widget's pods: the tests check what queuectl does to it (suspend on create, a
Workload with two pod sets, admission, unsuspend with placement in both templates).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

from queuectl.api import names
from queuectl.api.resource import Obj, Resource
from queuectl.jobs import Finished, JsonPatch, PodSet, PodSetPlacement
from queuectl.jobs import podtemplate as pt
from queuectl.jobs import workload as wl

GROUP: Final = "widgets.example.com"
WIDGETS: Final = Resource(GROUP, "v1", "widgets", True, "Widget")
TEMPLATES: Final = {"leader": ("spec", "leaderTemplate"), "workers": ("spec", "workerTemplate")}


class Widget:
    """The `JobKind` for Widgets, built from the shared helpers only."""

    resource: Resource = WIDGETS
    suspend_field: str = "spec.suspend"

    def queue_name(self, job: Obj) -> str | None:
        return wl.queue_name(job)

    def is_suspended(self, job: Obj) -> bool:
        return bool((job.get("spec") or {}).get("suspend"))

    def pod_sets(self, job: Obj) -> list[PodSet]:
        workers = int((job.get("spec") or {}).get("workers") or 1)
        return [
            PodSet("leader", 1, pt.at_path(job, TEMPLATES["leader"]) or {}, "one leader"),
            PodSet("workers", workers, pt.at_path(job, TEMPLATES["workers"]) or {}, "workers"),
        ]

    def workload_name(self, job: Obj) -> str:
        meta = job["metadata"]
        return wl.workload_name_for("widget", meta["name"], meta.get("uid", ""))

    def workload_spec(self, job: Obj) -> dict[str, Any]:
        return wl.workload_spec(job, self.pod_sets(job))

    def pod_priority_class(self, job: Obj) -> str | None:
        return pt.priority_class(pt.at_path(job, TEMPLATES["leader"]) or {})

    def finished(self, job: Obj) -> Finished | None:
        phase = (job.get("status") or {}).get("phase")
        if phase in ("Succeeded", "Failed"):
            reason = (
                names.REASON_FINISHED_SUCCEEDED
                if phase == "Succeeded"
                else names.REASON_FINISHED_FAILED
            )
            return Finished(phase == "Succeeded", reason, f"Widget {phase.lower()}")
        return None

    def pods_gone(self, job: Obj) -> bool:
        return not (job.get("status") or {}).get("active")

    def can_restore(self, job: Obj) -> bool:
        return self.is_suspended(job)

    def run_patch(
        self, job: Obj, pod_sets: Sequence[Obj], placements: Sequence[PodSetPlacement]
    ) -> dict[str, Any]:
        fragments = [pt.run_fragment(TEMPLATES[p.name], pod_sets, p) for p in placements]
        return pt.deep_merge({"spec": {"suspend": False}}, *fragments)

    def suspend_patch(self, job: Obj) -> dict[str, Any]:
        return {"spec": {"suspend": True}}

    def restore_patch(self, job: Obj, pod_sets: Sequence[Obj]) -> dict[str, Any] | None:
        fragments = [pt.restore_fragment(job, path, pod_sets, n) for n, path in TEMPLATES.items()]
        found = [f for f in fragments if f is not None]
        return pt.deep_merge(*found) if found else None

    def suspend_ops(self, job: Obj) -> JsonPatch:
        return wl.suspend_ops_at(job, "suspend")


def crd() -> dict[str, Any]:
    """The Widget CRD: templates kept as written (preserve-unknown-fields), a status with
    `phase` and `active`."""
    open_object = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"widgets.{GROUP}"},
        "spec": {
            "group": GROUP,
            "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "storage": True,
                    "subresources": {"status": {}},
                    "schema": {
                        "openAPIV3Schema": {
                            "type": "object",
                            "properties": {
                                "spec": {
                                    "type": "object",
                                    "properties": {
                                        "suspend": {"type": "boolean"},
                                        "workers": {"type": "integer"},
                                        "leaderTemplate": open_object,
                                        "workerTemplate": open_object,
                                    },
                                },
                                "status": open_object,
                            },
                        }
                    },
                }
            ],
        },
    }


def widget(name: str, namespace: str, queue: str, *, workers: int, gpus: int) -> dict[str, Any]:
    """A Widget queued in `queue`: a leader of one GPU and `workers` pods of `gpus` each."""

    def template(gpu_count: int) -> dict[str, Any]:
        requests = {names.GPU_RESOURCE: str(gpu_count)}
        return {
            "spec": {
                "containers": [
                    {
                        "name": "main",
                        "image": "registry.k8s.io/pause:3.10",
                        "resources": {"requests": requests, "limits": requests},
                    }
                ]
            }
        }

    return {
        "apiVersion": WIDGETS.api_version,
        "kind": "Widget",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {names.LABEL_QUEUE_NAME: queue},
        },
        "spec": {
            "workers": workers,
            "leaderTemplate": template(1),
            "workerTemplate": template(gpus),
        },
    }
