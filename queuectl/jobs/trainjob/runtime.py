"""A TrainJob's runtime, snapshotted: what trainer v2.1.0 builds its JobSet from, and the pod sets
that follow from it and the TrainJob.

A TrainJob names a (Cluster)TrainingRuntime (`spec.runtimeRef`, immutable); trainer builds the
JobSet from the runtime's `template` and `mlPolicy` each time it reconciles. queuectl's webhook
copies the part that decides pod sets into the annotation `queuectl.io/trainjob-runtime` when
the TrainJob is created, so every method reads the TrainJob alone (a runtime edited later is
not followed; trainer would follow it while the TrainJob is suspended).

Counts mirror trainer v2.1.0 (pkg/runtime/core/trainingruntime.go, plugins torch, plainml, mpi,
jobset): a replicated job runs `parallelism` (default 1) pods; the trainer step (label
`trainer.kubeflow.org/trainjob-ancestor-step: trainer`) runs `mlPolicy.numNodes` (default 1),
or the TrainJob's `trainer.numNodes`; under an MPI policy `numNodes` counts the job named
`node` instead (one less with `runLauncherAsNode`). Initializer and trainer steps run one
replica, others `replicas` (default 1). `trainer.resourcesPerNode` replaces the resources of the
trainer step's `node` container.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from typing import Any, Final

from queuectl.api import names
from queuectl.api.resource import Obj, Resource
from queuectl.api.views import ObjectView
from queuectl.jobs import podtemplate as pt
from queuectl.jobs.kind import InputRef, MissingInput

GROUP: Final = "trainer.kubeflow.org"
RUNTIMES: Final = Resource(GROUP, "v1alpha1", "trainingruntimes", True, "TrainingRuntime")
CLUSTER_RUNTIMES: Final = Resource(
    GROUP, "v1alpha1", "clustertrainingruntimes", False, "ClusterTrainingRuntime"
)
LABEL_ANCESTOR: Final = "trainer.kubeflow.org/trainjob-ancestor-step"
TRAINER: Final = "trainer"
ONE_REPLICA: Final = frozenset({TRAINER, "dataset-initializer", "model-initializer"})
NODE: Final = "node"
"""The container (and, under MPI, the replicated job) trainer's numNodes and resourcesPerNode
are about."""


def runtime_ref(job: Obj) -> InputRef:
    """The runtime the TrainJob names (kind defaults to ClusterTrainingRuntime, as the CRD)."""
    ref = pt.at_path(job, ("spec", "runtimeRef")) or {}
    namespaced = ref.get("kind") == RUNTIMES.kind
    namespace = ObjectView(job).namespace if namespaced else ""
    return InputRef(RUNTIMES if namespaced else CLUSTER_RUNTIMES, namespace, str(ref.get("name")))


def snapshot(runtime: Mapping[str, Any]) -> dict[str, Any]:
    """What of a runtime decides the pod sets: its kind and name (for messages), its mlPolicy,
    and per replicated job its name, replicas, ancestor step, parallelism and pod template."""
    spec = ObjectView(runtime).spec
    rjobs = []
    for rjob in pt.at_path(spec, ("template", "spec", "replicatedJobs")) or ():
        labels = pt.at_path(rjob, ("template", "metadata", "labels")) or {}
        rjobs.append(
            {
                "name": rjob.get("name"),
                "replicas": rjob.get("replicas"),
                "ancestor": labels.get(LABEL_ANCESTOR),
                "parallelism": pt.at_path(rjob, ("template", "spec", "parallelism")),
                "template": copy.deepcopy(pt.at_path(rjob, ("template", "spec", "template"))),
            }
        )
    return {
        "kind": runtime.get("kind"),
        "name": ObjectView(runtime).meta.get("name"),
        "mlPolicy": copy.deepcopy(spec.get("mlPolicy")),
        "replicatedJobs": rjobs,
    }


def encode(snap: Mapping[str, Any]) -> str:
    return json.dumps(snap, sort_keys=True, separators=(",", ":"))


def recorded(job: Mapping[str, Any]) -> dict[str, Any] | None:
    """The snapshot the TrainJob carries; None when it has none (or it does not parse)."""
    text = ObjectView(job).annotations.get(names.ANNOTATION_TRAINJOB_RUNTIME)
    try:
        found = json.loads(text) if text else None
    except ValueError:
        return None
    return found if isinstance(found, dict) else None


def missing(ref: InputRef, job_namespace: str) -> MissingInput:
    where = f"namespace {job_namespace!r}" if ref.namespace else "the cluster"
    listing = f"kubectl get {ref.resource.plural}"
    if ref.namespace:
        listing += f" -n {ref.namespace}"
    return MissingInput(
        f"its runtime {ref.resource.kind} {ref.name!r} (spec.runtimeRef) does not exist in "
        f"{where}; queuectl reads the pods to queue from it: create the runtime first, or name "
        f"an existing one (`{listing}`)"
    )


def pod_count(rjob: Mapping[str, Any], ml: Mapping[str, Any] | None, trainer: Obj) -> int:
    """Pods one replica of the replicated job runs at once, as trainer sets its parallelism."""
    count = int(rjob.get("parallelism") or 1)
    is_trainer = rjob.get("ancestor") == TRAINER
    if is_trainer and ml is not None:
        count = int(ml.get("numNodes") or 1)
    nodes = trainer.get("numNodes")
    if nodes is not None:
        mpi = (ml or {}).get("mpi")
        if mpi is not None:
            if rjob.get("name") == NODE:
                count = max(int(nodes) - 1, 1) if mpi.get("runLauncherAsNode") else int(nodes)
        elif is_trainer:  # torch, or a plain runtime without torch or mpi
            count = int(nodes)
    return max(count, 1)


def count_from(rjob: Mapping[str, Any], ml: Mapping[str, Any] | None) -> str:
    """Where the count comes from, in words, for the webhook's messages."""
    if rjob.get("ancestor") == TRAINER or ((ml or {}).get("mpi") and rjob.get("name") == NODE):
        return "trainer.numNodes, else the runtime's mlPolicy.numNodes"
    return f"the runtime's parallelism of {rjob.get('name')!r}"


def replicas(rjob: Mapping[str, Any]) -> int:
    if rjob.get("ancestor") in ONE_REPLICA:
        return 1
    return 1 if rjob.get("replicas") is None else int(rjob["replicas"])


def with_resources_per_node(
    template: Obj, rjob: Mapping[str, Any], ml: Mapping[str, Any] | None, trainer: Obj
) -> Obj:
    """The template with trainer.resourcesPerNode as the `node` container's resources (replaced
    whole, as trainer's builder does) in the trainer step (or MPI's `node` launcher-as-node)."""
    per_node = trainer.get("resourcesPerNode") or {}
    launcher_as_node = bool(((ml or {}).get("mpi") or {}).get("runLauncherAsNode"))
    applies = rjob.get("ancestor") == TRAINER or (launcher_as_node and rjob.get("name") == NODE)
    if not applies or not (per_node.get("limits") or per_node.get("requests")):
        return template
    out = copy.deepcopy(template)
    for container in pt.at_path(out, ("spec", "containers")) or ():
        if container.get("name") == NODE:
            container["resources"] = {
                k: copy.deepcopy(per_node[k]) for k in ("limits", "requests") if per_node.get(k)
            }
    return out
