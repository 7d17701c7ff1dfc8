"""Kueue documents in, queuectl objects and a report out: the whole conversion, without I/O.

The CLI (`queuectl import kueue`) reads files and writes YAML around `convert`. Steps:
1. Lists are opened into their items; every document is named `file#N` in what follows.
2. ProvisioningRequestConfigs are gathered first: an AdmissionCheck takes its class from one.
3. Each Kueue document of a kind queuectl has is converted by its kind's converter; any other
   document (another API group, a Kueue kind queuectl does not have) is skipped with a note.
4. Cross-checks: ClusterQueues that name checks nothing in queuectl decides are noted;
   objects defined twice are refused.
5. Every object is validated with queuectl's own models, which state the same rules as the
   CRDs, so what is written is what `kubectl apply` accepts.
Any problem fails the whole import (`ImportFailed`, all problems at once): no partial output.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from pydantic import ValidationError

from queuectl.api import KINDS, Resource, names
from queuectl.kueue import kinds, quota
from queuectl.kueue.fields import Doc, Fields, metadata
from queuectl.kueue.report import Action, Converted, ImportFailed, Report

KUEUE_GROUP: Final = "kueue.x-k8s.io"
VERSIONS: Final = ("v1beta1", "v1beta2")
ALPHA_KINDS: Final = frozenset({"Cohort", "Topology"})
"""Kinds Kueue served as v1alpha1 before v1beta1 (same fields as v1beta1)."""
ORDER: Final = (
    "Topology",
    "ResourceFlavor",
    "Cohort",
    "AdmissionCheck",
    "WorkloadPriorityClass",
    "ClusterQueue",
    "LocalQueue",
)
"""Output order: what is referred to before what refers to it, as `kubectl apply` reads it."""
PLURALS: Final = {
    "Topology": "topologies",
    "WorkloadPriorityClass": "workloadpriorityclasses",
}
MODELS: Final[dict[str, type[Resource]]] = {m.model_fields["kind"].default: m for m in KINDS}
SKIP_REASONS: Final = {
    "Workload": "queuectl makes a Workload for each queued job itself: label the jobs with "
    f"{names.LABEL_QUEUE_NAME} (and {names.LABEL_PRIORITY_CLASS}) instead",
    "MultiKueueConfig": "queuectl has no MultiKueue (dispatching workloads to other clusters)",
    "MultiKueueCluster": "queuectl has no MultiKueue (dispatching workloads to other clusters)",
}


@dataclass(frozen=True, slots=True)
class Source:
    """One YAML document as read: where it came from and what it holds."""

    origin: str
    """The file's path, or `-` for standard input."""
    index: int
    """Its position in the file, from 1."""
    body: Any


@dataclass(frozen=True, slots=True)
class Result:
    objects: list[dict[str, Any]]
    """queuectl objects in apply order."""
    report: Report


Convert = Callable[[Fields, kinds.Checks], dict[str, Any]]


CONVERTERS: Final[dict[str, Convert]] = {
    "ResourceFlavor": lambda body, _: kinds.resource_flavor(body),
    "Topology": lambda body, _: kinds.topology(body),
    "Cohort": lambda body, _: quota.cohort(body),
    "ClusterQueue": lambda body, _: quota.cluster_queue(body),
    "LocalQueue": lambda body, _: kinds.local_queue(body),
    "WorkloadPriorityClass": lambda body, _: kinds.priority_class(body),
    "AdmissionCheck": kinds.admission_check,
}


def convert(sources: Iterable[Source]) -> Result:
    """Convert Kueue manifests into queuectl's; raise `ImportFailed` naming every problem."""
    report = Report()
    problems: list[str] = []
    docs = list(_expand(sources, problems))
    checks = kinds.Checks(configs=_provisioning_configs(docs))
    converted: list[tuple[Doc, dict[str, Any]]] = []
    configs: list[tuple[Doc, Fields]] = []
    for label, body in docs:
        doc = _doc(label, body, report)
        if _group(body) != KUEUE_GROUP:
            doc.note(
                "",
                Action.SKIPPED,
                f"not a Kueue object ({body.get('apiVersion')}); apply it as it is if you need it",
            )
            continue
        fields = Fields(body, "", doc)
        fields.take("apiVersion")
        fields.take("kind")
        if doc.kind == kinds.PROVISIONING_CONFIG:
            configs.append((doc, fields))  # folded into its checks once they are converted
            continue
        obj = _convert_object(doc, fields, checks)
        problems += doc.problems
        if obj is not None and not doc.problems:
            converted.append((doc, obj))
    for doc, fields in configs:
        kinds.fold_config(fields, checks)
        fields.take("metadata")
        fields.take("status")
        fields.finish()
        problems += doc.problems
    _cross_check(converted, checks)
    problems += _duplicates(converted)
    if not problems and not any(_group(body) == KUEUE_GROUP for _, body in docs):
        problems.append(
            f"no Kueue object in the input ({len(docs)} document(s), none of API group "
            f"{KUEUE_GROUP}); point -f at Kueue manifests (kubectl get clusterqueues,"
            f"localqueues,... -o yaml)"
        )
    if problems:
        raise ImportFailed(problems)
    converted.sort(key=lambda c: ORDER.index(c[1]["kind"]))
    for doc, obj in converted:
        meta = obj["metadata"]
        report.converted.append(
            Converted(doc.label, obj["kind"], meta.get("name", ""), meta.get("namespace"))
        )
    return Result([obj for _, obj in converted], report)


def _doc(label: str, body: Mapping[str, Any], report: Report) -> Doc:
    """The document as notes and problems name it: `file#N Kind/name`."""
    kind = str(body.get("kind"))
    version = str(body.get("apiVersion")).rpartition("/")[2]
    meta = body.get("metadata")
    name = meta.get("name") if isinstance(meta, Mapping) else None
    return Doc(f"{label} {kind}/{name}" if name else f"{label} {kind}", kind, version, report)


def _provisioning_configs(
    docs: list[tuple[str, Mapping[str, Any]]],
) -> dict[str, Mapping[str, Any]]:
    """The input's ProvisioningRequestConfigs by name: a check may come before its config."""
    found: dict[str, Mapping[str, Any]] = {}
    for _, body in docs:
        if _group(body) == KUEUE_GROUP and body.get("kind") == kinds.PROVISIONING_CONFIG:
            meta = body.get("metadata")
            found[str(meta.get("name") if isinstance(meta, Mapping) else None)] = body
    return found


def _convert_object(doc: Doc, fields: Fields, checks: kinds.Checks) -> dict[str, Any] | None:
    """One Kueue object of a kind queuectl has, validated; None when skipped or refused
    (`doc.problems` says why)."""
    convert_kind = CONVERTERS.get(doc.kind)
    if convert_kind is None:
        doc.note("", Action.SKIPPED, SKIP_REASONS.get(doc.kind, f"queuectl has no {doc.kind}"))
        return None
    if doc.version not in VERSIONS and not (doc.version == "v1alpha1" and doc.kind in ALPHA_KINDS):
        plural = PLURALS.get(doc.kind, f"{doc.kind.lower()}s")
        doc.problem(
            f"{KUEUE_GROUP}/{doc.version} is not a version this importer reads (v1beta1, "
            "v1beta2; v1alpha1 for Cohort and Topology); export the objects at v1beta2, "
            f"e.g. `kubectl get {plural}.v1beta2.{KUEUE_GROUP} -o yaml`"
        )
        return None
    meta = metadata(fields.sub("metadata"), namespaced=MODELS[doc.kind].NAMESPACED)
    obj: dict[str, Any] = {"apiVersion": names.API_VERSION, "kind": doc.kind, "metadata": meta}
    obj.update(convert_kind(fields, checks))
    if fields.data.get("status"):
        doc.note("status", Action.DROPPED, "written by the controller; queuectl's writes its own")
    fields.take("status")
    fields.finish()
    _validate(doc, obj)
    return obj


def _group(body: Mapping[str, Any]) -> str:
    return str(body.get("apiVersion") or "").rpartition("/")[0]


def _expand(
    sources: Iterable[Source], problems: list[str]
) -> Iterable[tuple[str, Mapping[str, Any]]]:
    """(label, object) for every object, Lists opened; what is not an object is a problem."""
    for src in sources:
        yield from _objects(f"{src.origin}#{src.index}", src.body, problems)


def _objects(label: str, body: Any, problems: list[str]) -> Iterable[tuple[str, Mapping[str, Any]]]:
    if body is None:
        return  # an empty document (a trailing `---`)
    if not isinstance(body, Mapping) or not body.get("apiVersion") or not body.get("kind"):
        problems.append(
            f"{label}: not a Kubernetes object (a mapping with apiVersion and kind); "
            "give the importer Kueue manifests"
        )
        return
    if str(body["kind"]).endswith("List") and isinstance(body.get("items"), list):
        for i, item in enumerate(body["items"]):
            yield from _objects(f"{label} items[{i}]", item, problems)
        return
    yield label, body


def _validate(doc: Doc, obj: dict[str, Any]) -> None:
    """Refuse what queuectl's CRDs would refuse, in the models' words (the same as the CRDs')."""
    try:
        MODELS[obj["kind"]].model_validate(obj)
    except ValidationError as err:
        for e in err.errors():
            where = ".".join(str(p) if isinstance(p, str) else f"[{p}]" for p in e["loc"])
            where = where.replace(".[", "[")
            message = str(e["msg"]).removeprefix("Value error, ")
            doc.problem(
                f"{where or 'object'}: {message} (queuectl's schema refuses the converted "
                "object; fix it in the Kueue manifest)"
            )


def _cross_check(converted: list[tuple[Doc, dict[str, Any]]], checks: kinds.Checks) -> None:
    """Note the ClusterQueues whose checks nothing in queuectl decides, or that are missing."""
    defined = {o["metadata"].get("name") for _, o in converted if o["kind"] == "AdmissionCheck"}
    for doc, obj in converted:
        listed = (
            obj.get("spec", {}).get("admissionChecks", []) if obj["kind"] == "ClusterQueue" else []
        )
        unserved = [c for c in listed if c in checks.unserved]
        if unserved:
            doc.note(
                "spec.admissionChecks",
                Action.KEPT,
                f"{', '.join(unserved)}: decided by controllers queuectl does not run "
                f"({', '.join(sorted({checks.unserved[c] for c in unserved}))}); this queue "
                "admits nothing while it lists them",
            )
        missing = [c for c in listed if c not in defined]
        if missing:
            doc.note(
                "spec.admissionChecks",
                Action.KEPT,
                f"AdmissionCheck {', '.join(missing)} is not among the inputs; the queue "
                "admits nothing until it exists",
            )


def _duplicates(converted: list[tuple[Doc, dict[str, Any]]]) -> list[str]:
    first: dict[tuple[str, Any, Any], str] = {}
    problems = []
    for doc, obj in converted:
        meta = obj["metadata"]
        key = (obj["kind"], meta.get("namespace"), meta.get("name"))
        if key in first:
            problems.append(
                f"{doc.label}: defined again (first at {first[key]}); keep one of the two"
            )
        first.setdefault(key, doc.label)
    return problems
