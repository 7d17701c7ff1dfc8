"""ResourceFlavor, Topology, LocalQueue, WorkloadPriorityClass and AdmissionCheck.

Each converter takes the document's top level as `Fields` (apiVersion, kind and metadata
already read) and returns the queuectl object's body. The field names are Kueue's, so most
fields are copied; each difference is a note.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from queuectl.api import names
from queuectl.kueue.fields import Doc, Fields, items, present
from queuectl.kueue.report import Action

KUEUE_PROVISIONING: Final = "kueue.x-k8s.io/provisioning-request"
KUEUE_MULTIKUEUE: Final = "kueue.x-k8s.io/multikueue"
PROVISIONING_CONFIG: Final = "ProvisioningRequestConfig"


def resource_flavor(body: Fields) -> dict[str, Any]:
    spec = body.sub("spec")
    out = present(
        {
            "nodeLabels": spec.take("nodeLabels"),
            "nodeTaints": spec.take("nodeTaints"),
            "tolerations": spec.take("tolerations"),
            "topologyName": spec.take("topologyName"),
        }
    )
    spec.drop(
        "resourceWeights",
        "queuectl's fair share weighs every resource of a flavor alike (the dominant "
        "resource share); only queues and cohorts have weights",
    )
    spec.finish()
    return {"spec": out}


def topology(body: Fields) -> dict[str, Any]:
    spec = body.sub("spec")
    path = spec.at("levels")
    levels = []
    for i, level in enumerate(items(spec.take("levels"), path, spec.doc)):
        lf = Fields(level, f"{path}[{i}]", spec.doc)
        levels.append(present({"nodeLabel": lf.take("nodeLabel")}))
        lf.finish()
    spec.finish()
    return {"spec": {"levels": levels}}


def local_queue(body: Fields) -> dict[str, Any]:
    spec = body.sub("spec")
    out = present(
        {"clusterQueue": spec.take("clusterQueue"), "stopPolicy": spec.take("stopPolicy")}
    )
    spec.drop(
        "fairSharing",
        "queuectl has no admission fair sharing between the LocalQueues of a ClusterQueue: "
        "their workloads are ordered by priority, then age",
    )
    spec.drop(
        "wallTimePolicy",
        "queuectl has no wall-time budget per LocalQueue; a workload's "
        f"{names.LABEL_MAX_EXEC_TIME} label limits how long one workload runs",
    )
    spec.finish()
    return {"spec": out}


def priority_class(body: Fields) -> dict[str, Any]:
    """Top-level fields, as in Kueue (and PriorityClass). queuectl's own additions (a grace
    period before a preempted workload is stopped, a minimum runtime) keep their defaults,
    which behave as Kueue does: no notice, no protection."""
    return present({"value": body.take("value"), "description": body.take("description")})


@dataclass
class Checks:
    """What the AdmissionChecks of the input say, for the ClusterQueues that name them."""

    configs: dict[str, Mapping[str, Any]] = field(default_factory=dict)
    """ProvisioningRequestConfigs of the input, by name."""
    used_configs: dict[str, list[str]] = field(default_factory=dict)
    """Config name -> the AdmissionChecks that folded it in."""
    unserved: dict[str, str] = field(default_factory=dict)
    """Check name -> the controller that no part of queuectl runs."""


def admission_check(body: Fields, checks: Checks) -> dict[str, Any]:
    """Kueue's provisioning check becomes queuectl's built-in one, its class taken from the
    ProvisioningRequestConfig it names; any other controller is kept as it is (nothing in
    queuectl decides it, so the check stays not Active and its queues admit nothing)."""
    spec = body.sub("spec")
    doc = spec.doc
    name = str(body.data.get("metadata", {}).get("name", ""))
    controller = spec.take("controllerName")
    spec.drop(
        "retryDelayMinutes",
        "deprecated in Kueue; queuectl requeues a workload whose check says Retry with its "
        "own back-off (5 s, doubling, at most 600 s)",
    )
    parameters = spec.take("parameters")
    spec.finish()
    if controller != KUEUE_PROVISIONING:
        if controller is not None:
            checks.unserved[name] = str(controller)
            doc.note(
                "spec.controllerName",
                Action.KEPT,
                f"no part of queuectl decides checks of {controller}"
                + (" (queuectl has no MultiKueue)" if controller == KUEUE_MULTIKUEUE else "")
                + ": the check stays not Active and every ClusterQueue listing it admits "
                "nothing until a controller for queuectl.io Workloads serves it, or you take "
                "it out of their spec.admissionChecks",
            )
        return {"spec": present({"controllerName": controller, "parameters": parameters})}
    out: dict[str, Any] = {"controllerName": names.CHECK_PROVISIONING}
    klass = _provisioning_class(doc, name, parameters, checks)
    if klass is not None:
        out["parameters"] = {
            "apiGroup": names.PROVREQ_GROUP,
            "kind": names.PROVREQ_PARAMETERS_KIND,
            "name": klass,
        }
    return {"spec": out}


def _provisioning_class(doc: Doc, check: str, parameters: Any, checks: Checks) -> str | None:
    """The ProvisioningRequest class the check asks for; None: placeholder pods."""
    ref = parameters if isinstance(parameters, Mapping) else {}
    placeholders = (
        "queuectl's provisioning check then asks for capacity with placeholder pods (for "
        "Karpenter or any autoscaler that acts on pending pods), not a ProvisioningRequest"
    )
    if ref.get("kind") != PROVISIONING_CONFIG:
        doc.note(
            "spec.controllerName",
            Action.CHANGED,
            f"{KUEUE_PROVISIONING} -> {names.CHECK_PROVISIONING}; the check names no "
            f"{PROVISIONING_CONFIG}, so {placeholders}",
        )
        return None
    config_name = str(ref.get("name"))
    config = checks.configs.get(config_name)
    if config is None:
        doc.note(
            "spec.parameters",
            Action.CHANGED,
            f"{PROVISIONING_CONFIG} {config_name} is not among the inputs, so its class is "
            f"unknown and {placeholders}; import the config with the check, or set "
            f"spec.parameters {{apiGroup: {names.PROVREQ_GROUP}, kind: "
            f"{names.PROVREQ_PARAMETERS_KIND}, name: <class>}}",
        )
        return None
    checks.used_configs.setdefault(config_name, []).append(check)
    spec = config.get("spec") or {}
    klass = spec.get("provisioningClassName") if isinstance(spec, Mapping) else None
    if not klass:
        doc.problem(
            f"{PROVISIONING_CONFIG} {config_name} has no spec.provisioningClassName; give "
            "it the class the autoscaler should use"
        )
        return None
    reason = (
        f"{KUEUE_PROVISIONING} -> {names.CHECK_PROVISIONING}, asking cluster-autoscaler for "
        f"class {klass} (from {PROVISIONING_CONFIG} {config_name})"
    )
    if klass not in names.PROVREQ_CLASSES:
        reason += (
            f"; queuectl's check serves only {' and '.join(names.PROVREQ_CLASSES)}, so this "
            "check stays not Active and its queues admit nothing until you pick one"
        )
    doc.note("spec.controllerName", Action.CHANGED, reason)
    return str(klass)


CONFIG_FIELDS: Final = {
    "provisioningClassName": "",
    "parameters": "queuectl passes no parameters to the ProvisioningRequest",
    "managedResources": "queuectl asks for the whole pod (every resource it requests)",
    "retryStrategy": (
        "a failed request is a Retry: queuectl requeues the workload with its own back-off "
        "(5 s, doubling, at most 600 s) and asks again, without a limit on attempts"
    ),
    "podSetUpdates": "queuectl injects only the flavor's and topology's placement",
    "podSetMergePolicy": "queuectl asks with one PodTemplate per pod set",
}


def fold_config(body: Fields, checks: Checks) -> None:
    """Report a ProvisioningRequestConfig: its class went into the checks that name it."""
    doc = body.doc
    spec = body.sub("spec")
    name = str(body.data.get("metadata", {}).get("name", ""))
    users = checks.used_configs.get(name)
    for key, reason in CONFIG_FIELDS.items():
        if reason:
            spec.drop(key, reason)
        else:
            spec.take(key)
    spec.finish()
    if users:
        doc.note(
            "",
            Action.FOLDED,
            f"queuectl has no {PROVISIONING_CONFIG} kind: its provisioningClassName went into "
            f"the spec.parameters of AdmissionCheck {', '.join(users)}",
        )
    else:
        doc.note(
            "",
            Action.SKIPPED,
            f"no AdmissionCheck of the input names it, and queuectl has no {PROVISIONING_CONFIG} "
            "kind",
        )
