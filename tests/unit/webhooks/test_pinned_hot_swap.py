"""The pinning webhook after a node hot swap: a sliced gang's template still pins index 0 to
node a (a running Job's template cannot change), but the controller moved that pod's place to
node c in the Workload's topology assignment; the pod the Job controller makes again is
pinned to c. While the webhook's cache has not seen the move, a pod whose place is a node the
controller drained is refused (the Job controller retries); without anything in the cache the
template's pin stands, as before."""

from __future__ import annotations

import base64
import copy
import json
from typing import Any

import pytest

from queuectl.api import names
from queuectl.jobs import PodSetPlacement, pinning
from queuectl.webhooks.lookup import InMemoryLookup
from queuectl.webhooks.pinned import mutate_pinned_pod

RACK = "example.com/rack"
HOST = names.LABEL_HOSTNAME
PINS = pinning.annotation(
    PodSetPlacement(
        "main", pins=pinning.pins_of([(1, {RACK: "r1", HOST: "a"}), (1, {RACK: "r1", HOST: "b"})])
    ),
    pinning.INDEXED_JOB,
)
JOB = {
    "apiVersion": "batch/v1",
    "kind": "Job",
    "metadata": {
        "name": "gang",
        "namespace": "ns",
        "uid": "j1",
        "labels": {names.LABEL_WORKLOAD: "job-gang", names.LABEL_QUEUE_NAME: "lq"},
    },
}


def pod(index: int, job_uid: str = "j1") -> dict[str, Any]:
    ref = {"apiVersion": "batch/v1", "kind": "Job", "name": "gang", "uid": job_uid}
    return {
        "metadata": {
            "generateName": "gang-",
            "namespace": "ns",
            "labels": {names.LABEL_JOB_COMPLETION_INDEX: str(index)},
            "annotations": {names.ANNOTATION_POD_PINS: PINS},
            "ownerReferences": [{**ref, "controller": True}],
        },
        "spec": {"containers": [{"name": "main", "image": "x"}]},
    }


def workload(hosts: list[str]) -> dict[str, Any]:
    domains = [{"values": ["r1", h], "count": 1} for h in hosts]
    assignment = {
        "name": "main",
        "count": len(hosts),
        "topologyAssignment": {"levels": [RACK, HOST], "domains": domains},
    }
    return {
        "metadata": {"name": "job-gang", "namespace": "ns"},
        "status": {"admission": {"clusterQueue": "cq", "podSetAssignments": [assignment]}},
    }


def drained(name: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "annotations": {names.ANNOTATION_NODE_DRAINED: "{}"}}}


def lookup(*, hosts: list[str] | None, drained_nodes: tuple[str, ...] = ()) -> InMemoryLookup:
    found = InMemoryLookup()
    found.inputs[("jobs", "ns", "gang")] = copy.deepcopy(JOB)
    if hosts is not None:
        found.inputs[("workloads", "ns", "job-gang")] = workload(hosts)
    for name in drained_nodes:
        found.inputs[("nodes", "", name)] = drained(name)
    return found


def review(obj: dict[str, Any]) -> dict[str, Any]:
    return {"uid": "u", "operation": "CREATE", "namespace": "ns", "object": obj}


def pinned_to(response: dict[str, Any]) -> str:
    assert response["allowed"], response
    (op,) = json.loads(base64.b64decode(response["patch"]))
    terms = op["value"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    (host,) = {
        e["values"][0]
        for t in terms["nodeSelectorTerms"]
        for e in t["matchExpressions"]
        if e["key"] == HOST
    }
    return str(host)


@pytest.mark.parametrize(
    ("case", "found", "index", "want"),
    [
        ("swapped: index 0 goes where the assignment says", lookup(hosts=["c", "b"]), 0, "c"),
        ("swapped: index 1 stays", lookup(hosts=["c", "b"]), 1, "b"),
        ("nothing in the cache: the template's pin", lookup(hosts=None), 0, "a"),
        ("the assignment as admitted", lookup(hosts=["a", "b"]), 0, "a"),
        (
            "several pod sets placed: the template's pin",
            lookup(hosts=None),
            0,
            "a",
        ),
    ],
)
def test_a_recreated_pod_is_pinned_to_its_place_in_the_assignment_as_it_is_now(
    case: str, found: InMemoryLookup, index: int, want: str
) -> None:
    if case.startswith("several"):
        wl = workload(["c", "b"])
        second = copy.deepcopy(wl["status"]["admission"]["podSetAssignments"][0])
        wl["status"]["admission"]["podSetAssignments"].append({**second, "name": "other"})
        found.inputs[("workloads", "ns", "job-gang")] = wl
    assert pinned_to(mutate_pinned_pod(review(pod(index)), found)) == want, case


def test_a_pod_claiming_the_job_under_another_uid_reads_no_workload() -> None:
    response = mutate_pinned_pod(review(pod(0, job_uid="forged")), lookup(hosts=["c", "b"]))
    assert pinned_to(response) == "a"


def test_a_pod_whose_place_was_drained_is_refused_until_the_cache_has_the_swap() -> None:
    stale = lookup(hosts=["a", "b"], drained_nodes=("a",))
    response = mutate_pinned_pod(review(pod(0)), stale)
    assert not response["allowed"]
    message = response["status"]["message"]
    assert "node a, was drained by queuectl" in message and "create succeeds once" in message
    fresh = lookup(hosts=["c", "b"], drained_nodes=("a",))
    assert pinned_to(mutate_pinned_pod(review(pod(0)), fresh)) == "c"
    # Without a lookup (the pure path) the template's pin stands, drained or not.
    assert pinned_to(mutate_pinned_pod(review(pod(0)))) == "a"
