"""Hand-made AdmissionReviews that pass the envelope checks but carry a field of the wrong type
where a decision reads it: Mallory posts them straight to the webhook port. Each gets a denial
that names the field and the type it needs, never "failed internally".

The samples are the manifests users apply (config/samples), one per route and kind; the family
replaces every field of each, one at a time, by a string, a list, an object, a number and null,
on create and on update (the job admitted, so its shape is compared), and asks every route that
reads the kind."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from aiohttp.test_utils import TestClient, TestServer
from webhook_cases import NS, USER

from queuectl import metrics
from queuectl.api import names
from queuectl.jobs.registry import KINDS
from queuectl.jobs.trainjob import TrainJob
from queuectl.webhooks import wellformed
from queuectl.webhooks.lookup import InMemoryLookup
from queuectl.webhooks.review import MalformedReview, Response, deny, parse_review
from queuectl.webhooks.server import decisions, make_app

SAMPLES = Path(__file__).resolve().parents[3] / "config" / "samples"
WRONG: list[Any] = ["x", [1], {"a": 1}, 7, None]
POD_KIND = {"group": "", "version": "v1", "kind": "Pod"}
JOB_ROUTES = (
    names.WEBHOOK_PATH_MUTATE_JOB,
    names.WEBHOOK_PATH_MUTATE_UNLABELLED_JOB,
    names.WEBHOOK_PATH_VALIDATE_JOB,
    names.WEBHOOK_PATH_VALIDATE_OWNED_JOB,
)
POD_ROUTES = (names.WEBHOOK_PATH_MUTATE_POD, names.WEBHOOK_PATH_VALIDATE_POD)


def _docs(name: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all((SAMPLES / name).read_text()) if d]


def _queued(obj: dict[str, Any]) -> dict[str, Any]:
    obj = copy.deepcopy(obj)
    meta = obj["metadata"]
    meta["namespace"] = NS
    if names.LABEL_QUEUE_NAME in (meta.get("labels") or {}):
        meta["labels"][names.LABEL_QUEUE_NAME] = "gpu"
    return obj


def _job() -> dict[str, Any]:
    """The samples' GPU Job, with every pod-spec field a decision reads filled in."""
    job = _queued(next(d for d in _docs("30-jobs.yaml") if d["spec"].get("parallelism")))
    job["spec"]["completions"] = job["spec"]["parallelism"]
    template = job["spec"]["template"]
    template.setdefault("metadata", {})["annotations"] = {
        names.ANNOTATION_PODSET_REQUIRED_TOPOLOGY: "topology.kubernetes.io/rack",
        names.ANNOTATION_PODSET_GROUP_NAME: "ddp",
    }
    pod = template["spec"]
    pod["initContainers"] = [{"name": "init", "image": "x", "restartPolicy": "Always"}]
    pod["overhead"] = {"cpu": "100m"}
    pod["nodeSelector"] = {"pool": "gpu"}
    pod["tolerations"] = [{"key": "nvidia.com/gpu", "operator": "Exists"}]
    pod["schedulingGates"] = [{"name": "example.com/wait"}]
    pod["priorityClassName"] = "high"
    term = {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}
    pod["affinity"] = {
        "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [term]
        }}
    }  # fmt: skip
    return job


def _trainjob() -> tuple[dict[str, Any], dict[str, Any]]:
    """The sample TrainJob as the mutating webhook leaves it (its runtime recorded)."""
    runtime = _docs("kinds/trainjob-runtime.yaml")[0]
    job = _queued(_docs("kinds/trainjob.yaml")[0])
    job["spec"]["suspend"] = True
    for op in TrainJob().snapshot_ops(job, runtime):
        job["metadata"].setdefault("annotations", {}).update(op["value"])
    return job, runtime


def _kind_of(obj: dict[str, Any]) -> dict[str, str]:
    group, _, version = obj["apiVersion"].rpartition("/")
    return {"group": group, "version": version, "kind": obj["kind"]}


def samples() -> list[tuple[str, dict[str, Any], tuple[str, ...]]]:
    """(what, object, the routes that read it)."""
    out = [("Job", _job(), JOB_ROUTES)]
    for name in ("jobset", "pytorchjob", "mpijob", "raycluster", "rayjob"):
        obj = _queued(_docs(f"kinds/{name}.yaml")[0])
        out.append((obj["kind"], obj, JOB_ROUTES))
    out.append(("TrainJob", _trainjob()[0], JOB_ROUTES))
    pod = _queued(_docs("31-pod-group.yaml")[0])
    pod["spec"]["schedulingGates"] = [{"name": "queuectl.io/admission"}]
    out.append(("Pod", pod, POD_ROUTES))
    lws = _queued(_docs("kinds/leaderworkerset.yaml")[0])
    out.append(("LeaderWorkerSet", lws, (names.WEBHOOK_PATH_MUTATE_LWS,)))
    for file, kind in (
        ("21-cluster-queues.yaml", "ClusterQueue"),
        ("20-cohorts.yaml", "Cohort"),
        ("22-local-queues.yaml", "LocalQueue"),
    ):
        obj = next(d for d in _docs(file) if d["kind"] == kind and d.get("spec"))
        out.append((kind, obj, (names.WEBHOOK_PATH_VALIDATE_QUEUECTL,)))
    return out


@pytest.fixture
def lookup() -> InMemoryLookup:
    """team-a's `gpu` queue feeds cq-a, which takes team-a; the sample jobs are admitted."""
    runtime = _trainjob()[1]
    admitted = {(NS, obj["metadata"]["name"]) for _, obj, _ in samples()}
    return InMemoryLookup(
        local_queues={(NS, "gpu"): "cq-a", (NS, names.DEFAULT_LOCAL_QUEUE): "cq-a"},
        cluster_queues={"cq-a": {}, "research-vision": {}},
        namespaces={NS: {"kubernetes.io/metadata.name": NS}},
        admitted_jobs=admitted,
        inputs={("clustertrainingruntimes", "", runtime["metadata"]["name"]): runtime},
    )


def review(obj: Any, old: Any = None, like: dict[str, Any] | None = None) -> dict[str, Any]:
    """A review of `obj` (an update from `old`), its kind and name those of `like` (a good
    sample) or of `obj`."""
    source = like or obj
    request = {
        "uid": "u-1",
        "kind": _kind_of(source),
        "operation": "UPDATE" if old is not None else "CREATE",
        "name": source["metadata"]["name"],
        "namespace": NS,
        "userInfo": {"username": USER, "groups": ["system:authenticated"]},
        "object": obj,
        "oldObject": old,
    }
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}


def answer(route: str, body: dict[str, Any], lookup: InMemoryLookup) -> Response | None:
    """What the server answers a review on `route` (None: refused as malformed, HTTP 400), as
    its handler does it: the envelope, then the types the route reads, then the decision."""
    try:
        request = parse_review(json.dumps(body))
    except MalformedReview:
        return None
    ill_typed = wellformed.problem(route, request, KINDS)
    if ill_typed is not None:
        return deny(request, ill_typed, code=422)
    decide = {path: d for path, d, _ in decisions(lookup, kinds=KINDS)}[route]
    return decide(request)


def paths(value: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    """Every field and list item below `value` (the leaves and the objects that hold them)."""
    items = value.items() if isinstance(value, dict) else enumerate(value)
    for key, found in items:
        yield (*path, key)
        if isinstance(found, dict | list):
            yield from paths(found, (*path, key))


def replaced(obj: dict[str, Any], path: tuple[Any, ...], value: Any) -> dict[str, Any]:
    out = copy.deepcopy(obj)
    node: Any = out
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = copy.deepcopy(value)
    return out


def _snapshot_variants(job: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    """The TrainJob with each field of its recorded runtime (JSON in an annotation) replaced."""
    key = names.ANNOTATION_TRAINJOB_RUNTIME
    snap = json.loads(job["metadata"]["annotations"][key])
    for path in paths(snap):
        for value in WRONG:
            text = json.dumps(replaced(snap, path, value))
            where = f"annotation {key} {'.'.join(map(str, path))}={value!r}"
            yield where, replaced(job, ("metadata", "annotations", key), text)


Case = tuple[str, str, dict[str, Any], dict[str, Any] | None, dict[str, Any]]


def family() -> Iterator[Case]:
    """(what, route, object, old object, the good sample): every field of every sample, of
    every wrong type."""
    for what, good, routes in samples():
        variants: list[tuple[str, dict[str, Any]]] = [
            (f"{'.'.join(map(str, path))}={value!r}", replaced(good, path, value))
            for path in paths(good)
            if path[0] not in ("apiVersion", "kind")
            for value in WRONG
        ]
        if what == "TrainJob":
            variants += list(_snapshot_variants(good))
        for where, bad in variants:
            for route in routes:
                yield f"{what} {where} on {route}", route, bad, None, good
                yield f"{what} {where} on {route} (update)", route, bad, good, good
                yield f"{what} {where} was, on {route} (update)", route, good, bad, good


def test_the_samples_as_users_apply_them_are_well_formed(lookup: InMemoryLookup) -> None:
    for what, obj, routes in samples():
        for route in routes:
            for body in (review(obj), review(obj, old=obj)):
                request = parse_review(json.dumps(body))
                assert wellformed.problem(route, request, KINDS) is None, (what, route)


def test_every_field_of_every_sample_of_any_type_gets_an_answer_never_an_exception(
    lookup: InMemoryLookup,
) -> None:
    refused_by_type: dict[str, int] = {}
    for what, route, obj, old, good in family():
        body = review(obj, old, like=good)
        try:
            response = answer(route, body, lookup)
        except Exception as exc:  # what the server would answer "failed internally"
            raise AssertionError(f"{what}: {type(exc).__name__}: {exc}") from exc
        if response is None or response["allowed"]:
            continue
        status = response["status"]
        assert status["code"] < 500 and status["message"], what
        if status["code"] == 422 and "was not sent by it" in status["message"]:
            kind = what.split(" ", 1)[0]
            refused_by_type[kind] = refused_by_type.get(kind, 0) + 1
    # every kind has fields its decisions read, so each is refused by type somewhere
    assert set(refused_by_type) == {what for what, _, _ in samples()}


def test_every_registered_kind_has_the_types_its_decisions_read() -> None:
    assert set(KINDS) <= set(wellformed.JOB_KINDS)


CQ = next(d for d in _docs("21-cluster-queues.yaml") if d["kind"] == "ClusterQueue")
POD = _queued(_docs("31-pod-group.yaml")[0])
SPEC = ("spec", "template", "spec")
SCALE = {
    "apiVersion": "autoscaling/v1",
    "kind": "Scale",
    "metadata": {"name": "train", "namespace": NS},
    "spec": {"replicas": 1},
}

# (route, object, old object, the field named, the type it needs)
NAMED = [
    pytest.param(
        names.WEBHOOK_PATH_VALIDATE_JOB,
        replaced(_job(), ("spec", "parallelism"), "abc"),
        None,
        "request.object.spec.parallelism",
        "a whole number",
        id="parallelism-abc-create",
    ),
    pytest.param(
        names.WEBHOOK_PATH_VALIDATE_JOB,
        replaced(_job(), ("spec", "parallelism"), "abc"),
        _job(),
        "request.object.spec.parallelism",
        "a whole number",
        id="parallelism-abc-update-admitted",
    ),
    pytest.param(
        names.WEBHOOK_PATH_MUTATE_JOB,
        replaced(_job(), ("spec", "parallelism"), 1e300),
        _job(),
        "request.object.spec.parallelism",
        "a whole number",
        id="parallelism-huge-update",
    ),
    pytest.param(
        names.WEBHOOK_PATH_VALIDATE_JOB,
        _job(),
        replaced(_job(), (*SPEC, "containers"), "c"),
        "request.oldObject.spec.template.spec.containers",
        "a list",
        id="old-containers-string",
    ),
    pytest.param(
        names.WEBHOOK_PATH_VALIDATE_JOB,
        replaced(_job(), (*SPEC, "containers"), "c"),
        _job(),
        "request.object.spec.template.spec.containers",
        "a list",
        id="containers-string",
    ),
    pytest.param(
        names.WEBHOOK_PATH_VALIDATE_POD,
        replaced(POD, ("spec", "schedulingGates"), "queuectl.io/admission"),
        POD,
        "request.object.spec.schedulingGates",
        "a list",
        id="scheduling-gates-string",
    ),
    pytest.param(
        names.WEBHOOK_PATH_MUTATE_POD,
        replaced(POD, ("spec", "schedulingGates"), ["queuectl.io/admission"]),
        None,
        "request.object.spec.schedulingGates[0]",
        "an object",
        id="scheduling-gate-string",
    ),
    pytest.param(
        names.WEBHOOK_PATH_VALIDATE_QUEUECTL,
        replaced(CQ, ("spec", "resourceGroups", 0), "h100"),
        None,
        "request.object.spec.resourceGroups[0]",
        "an object",
        id="resource-group-string",
    ),
    pytest.param(
        names.WEBHOOK_PATH_VALIDATE_SCALE,
        replaced(SCALE, ("spec", "replicas"), "abc"),
        SCALE,
        "request.object.spec.replicas",
        "a whole number",
        id="scale-replicas-string",
    ),
]


@pytest.mark.parametrize(("route", "obj", "old", "field", "needs"), NAMED)
async def test_a_hand_made_review_is_denied_naming_the_field_and_its_type(
    lookup: InMemoryLookup,
    route: str,
    obj: dict[str, Any],
    old: dict[str, Any] | None,
    field: str,
    needs: str,
) -> None:
    errors = metrics.WEBHOOK_INTERNAL_ERRORS.labels(route=route, answer="denied")
    before = errors._value.get()
    async with TestClient(TestServer(make_app(lookup))) as client:
        response = await client.post(route, json=review(obj, old))
        assert response.status == 200
        answer = (await response.json())["response"]
    assert answer["allowed"] is False
    assert answer["status"]["code"] == 422
    message = answer["status"]["message"]
    assert message.startswith(f"{field} must be {needs}")
    assert ", got " in message
    assert "was not sent by it" in message
    assert errors._value.get() == before


def test_every_route_but_the_workloads_checks_the_types_its_decisions_read(
    lookup: InMemoryLookup,
) -> None:
    """A route added without a schema would answer a hand-made body with an exception again."""
    routes = {path for path, _, _ in decisions(lookup)}
    assert routes - set(wellformed.ROUTES) == {names.WEBHOOK_PATH_VALIDATE_WORKLOAD}
