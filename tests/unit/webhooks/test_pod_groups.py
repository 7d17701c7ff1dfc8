"""Plain pod groups through the webhooks: a queued bare pod is created gated and labelled with
its ClusterQueue; nobody but the controller lifts the gate; its group cannot change under it."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from webhook_cases import NS, apply_patch, request

from queuectl.api import names
from queuectl.jobs import podgroup as pg
from queuectl.webhooks.lookup import InMemoryLookup
from queuectl.webhooks.pods import mutate_pod, validate_pod
from queuectl.webhooks.review import decode_patch

POD_KIND = {"group": "", "version": "v1", "kind": "Pod"}
Q, CQ = names.LABEL_QUEUE_NAME, names.LABEL_CLUSTER_QUEUE
GROUP, COUNT = names.LABEL_POD_GROUP_NAME, names.ANNOTATION_POD_GROUP_TOTAL_COUNT
CONTROLLER = names.CONTROLLER_USERNAME


def pod(
    labels: dict[str, str] | None = None,
    count: str | None = None,
    gated: bool = False,
    owner: bool = False,
) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "w-0", "namespace": NS, "labels": dict(labels or {})}
    if count is not None:
        meta["annotations"] = {COUNT: count}
    if owner:
        meta["ownerReferences"] = [
            {"apiVersion": "batch/v1", "kind": "Job", "name": "j", "uid": "u", "controller": True}
        ]
    spec: dict[str, Any] = {"containers": [{"name": "c", "image": "x"}]}
    if gated:
        spec["schedulingGates"] = [{"name": pg.GATE}]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}


def with_annotations(obj: dict[str, Any], annotations: dict[str, str]) -> dict[str, Any]:
    obj["metadata"].setdefault("annotations", {}).update(annotations)
    return obj


def mutated(lookup: InMemoryLookup, obj: dict[str, Any]) -> dict[str, Any]:
    response = mutate_pod(request(obj, kind=POD_KIND), lookup)
    assert response["allowed"] is True
    return apply_patch(obj, decode_patch(response))


def test_a_queued_pod_is_created_gated_with_its_cluster_queue(lookup: InMemoryLookup) -> None:
    out = mutated(lookup, pod({Q: "gpu", GROUP: "g"}, count="4"))
    assert out["spec"]["schedulingGates"] == [{"name": pg.GATE}]
    assert out["metadata"]["labels"] == {Q: "gpu", GROUP: "g", CQ: "cq-a"}
    assert validate_pod(request(out, kind=POD_KIND), lookup)["allowed"] is True


@pytest.mark.parametrize(
    ("case", "obj"),
    [
        ("no queue label", pod({"app": "x"})),
        ("a Job's pod: its Job is queued, not the pod", pod({Q: "gpu"}, owner=True)),
    ],
)
def test_other_pods_pass_untouched(lookup: InMemoryLookup, case: str, obj: dict[str, Any]) -> None:
    assert mutated(lookup, obj) == obj, case
    assert validate_pod(request(obj, kind=POD_KIND), lookup)["allowed"] is True, case


def test_a_missing_queue_warns_and_still_gates(lookup: InMemoryLookup) -> None:
    obj = pod({Q: "nope"})
    response = mutate_pod(request(obj, kind=POD_KIND), lookup)
    assert "LocalQueue team-a/nope does not exist" in response["warnings"][0]
    assert pg.is_gated(apply_patch(obj, decode_patch(response)))


@pytest.mark.parametrize(
    ("case", "obj", "words"),
    [
        ("created ungated (mutating webhook missing)", pod({Q: "gpu"}), "scheduling gate"),
        ("group without a count", pod({Q: "gpu", GROUP: "g"}, gated=True), "needs annotation"),
        ("count without a group", pod({Q: "gpu"}, count="2", gated=True), "needs label"),
        (
            "workload label set by the user",
            pod({Q: "gpu", names.LABEL_WORKLOAD: "w"}, gated=True),
            "set by queuectl only",
        ),
        (
            "an invalid pod-set group name",
            with_annotations(
                pod({Q: "gpu"}, gated=True),
                {
                    names.ANNOTATION_PODSET_REQUIRED_TOPOLOGY: "topology.queuectl.io/rack",
                    names.ANNOTATION_PODSET_GROUP_NAME: "Leader+Workers",
                },
            ),
            "pod 'w-0': annotation queuectl.io/podset-group-name='Leader+Workers' is not a valid",
        ),
    ],
)
def test_bad_creates_are_refused(
    lookup: InMemoryLookup, case: str, obj: dict[str, Any], words: str
) -> None:
    response = validate_pod(request(obj, kind=POD_KIND), lookup)
    assert response["allowed"] is False, case
    assert words in response["status"]["message"], case


def admitted(obj: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(obj)
    out["spec"].pop("schedulingGates")
    return out


@pytest.mark.parametrize(
    ("case", "change", "words"),
    [
        ("lifting the gate by hand", admitted, "lifted by queuectl"),
        (
            "moving to another group",
            lambda p: {**p, "metadata": {**p["metadata"], "labels": {Q: "gpu", GROUP: "h"}}},
            f"label {GROUP} cannot change",
        ),
        (
            "changing the count",
            lambda p: {**p, "metadata": {**p["metadata"], "annotations": {COUNT: "8"}}},
            f"annotation {COUNT} cannot change",
        ),
        (
            "removing the queue label",
            lambda p: {**p, "metadata": {**p["metadata"], "labels": {GROUP: "g"}}},
            f"label {Q} cannot change",
        ),
    ],
)
def test_bypasses_are_refused_but_the_controller_may_ungate(
    lookup: InMemoryLookup, case: str, change: Any, words: str
) -> None:
    old = pod({Q: "gpu", GROUP: "g"}, count="4", gated=True)
    new = change(copy.deepcopy(old))
    response = validate_pod(request(new, old, kind=POD_KIND), lookup)
    assert response["allowed"] is False, case
    assert words in response["status"]["message"], case
    if change is admitted:
        by_controller = request(new, old, kind=POD_KIND, user=CONTROLLER)
        assert validate_pod(by_controller, lookup)["allowed"] is True
