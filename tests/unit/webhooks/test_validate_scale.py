"""`kubectl scale` on a queued job: its scale subresource may not change what an admission was
sized for. The review carries an autoscaling/v1 Scale (no labels, no pod sets), so the decision
reads the job itself: an admitted or running queued PyTorchJob raised from 1 worker to 3 is
refused, naming the kind, the job and what to do; a waiting one may be scaled (its Workload
follows), an unqueued one is not queuectl's; the controller is exempt. A job that cannot be
read is refused: the Scale alone says nothing about the job's queue."""

from __future__ import annotations

import asyncio
import copy
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer

from queuectl.api import names
from queuectl.jobs.pytorch.kind import PYTORCH_JOBS
from queuectl.webhooks.lookup import InMemoryLookup
from queuectl.webhooks.scale import read_job, validate_scale
from queuectl.webhooks.server import make_app

NS, NAME = "team-a", "train"
CONTROLLER = names.CONTROLLER_USERNAME
USERS = frozenset({CONTROLLER})
KEY = (PYTORCH_JOBS.plural, NS, NAME)


def pytorch_job(queued: bool = True, suspended: bool = True) -> dict[str, Any]:
    labels = {names.LABEL_QUEUE_NAME: "lq"} if queued else {}
    replica = {"replicas": 1, "template": {"spec": {"containers": [{"name": "pytorch"}]}}}
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": NAME, "namespace": NS, "labels": labels},
        "spec": {
            "runPolicy": {"suspend": suspended},
            "pytorchReplicaSpecs": {"Master": replica, "Worker": copy.deepcopy(replica)},
        },
    }


def scale(replicas: int) -> dict[str, Any]:
    return {
        "apiVersion": "autoscaling/v1",
        "kind": "Scale",
        "metadata": {"name": NAME, "namespace": NS},
        "spec": {"replicas": replicas},
    }


def scale_request(old: int = 1, new: int = 3, user: str = "alice") -> dict[str, Any]:
    return {
        "uid": "u1",
        "kind": {"group": "autoscaling", "version": "v1", "kind": "Scale"},
        "resource": {"group": "kubeflow.org", "version": "v1", "resource": "pytorchjobs"},
        "subResource": "scale",
        "operation": "UPDATE",
        "namespace": NS,
        "name": NAME,
        "userInfo": {"username": user},
        "object": scale(new),
        "oldObject": scale(old),
    }


def decide(lookup: InMemoryLookup, request: dict[str, Any]) -> dict[str, Any]:
    asyncio.run(read_job(request, lookup))
    return validate_scale(request, lookup, USERS)


def in_cache(job: dict[str, Any], admitted: bool = False) -> InMemoryLookup:
    lookup = InMemoryLookup(owners={KEY: job})
    if admitted:
        lookup.admitted_jobs.add((NS, NAME))
    return lookup


# fmt: off
CASES = [
    pytest.param(in_cache(pytorch_job(), admitted=True), scale_request(), False,
                 id="queued and admitted: 1 -> 3 workers is refused"),
    pytest.param(in_cache(pytorch_job(suspended=False)), scale_request(), False,
                 id="queued and running (evicted, not yet suspended): refused"),
    pytest.param(in_cache(pytorch_job(), admitted=True), scale_request(3, 1), False,
                 id="scaling down while admitted is a change of shape too"),
    pytest.param(in_cache(pytorch_job()), scale_request(), True,
                 id="queued and waiting: its Workload follows the new shape"),
    pytest.param(in_cache(pytorch_job(queued=False, suspended=False)), scale_request(), True,
                 id="unqueued: not queuectl's"),
    pytest.param(in_cache(pytorch_job(), admitted=True), scale_request(1, 1), True,
                 id="admitted, replicas unchanged: nothing to refuse"),
    pytest.param(in_cache(pytorch_job(), admitted=True), scale_request(user=CONTROLLER), True,
                 id="the controller is exempt"),
    pytest.param(InMemoryLookup(api_server={KEY: pytorch_job(suspended=False)}), scale_request(),
                 False, id="not in the cache yet: read from the API server, running, refused"),
    pytest.param(InMemoryLookup(api_server={KEY: pytorch_job()}), scale_request(), True,
                 id="not in the cache yet: read from the API server, waiting, allowed"),
    pytest.param(InMemoryLookup(), scale_request(), False,
                 id="cannot be read at all: refused, the Scale itself is never trusted"),
]
# fmt: on


@pytest.mark.parametrize(("lookup", "request_", "allowed"), CASES)
def test_a_scale_request_is_judged_by_the_job_it_scales(
    lookup: InMemoryLookup, request_: dict[str, Any], allowed: bool
) -> None:
    response = decide(lookup, request_)
    assert response["allowed"] is allowed, response
    if not allowed:
        assert f"PyTorchJob {NS}/{NAME}" in response["status"]["message"]


def test_the_refusal_says_what_changed_and_what_to_do() -> None:
    response = decide(in_cache(pytorch_job(), admitted=True), scale_request())
    message = response["status"]["message"]
    assert "replicas cannot change from 1 to 3" in message
    assert "while it is admitted" in message
    assert "wait until it finishes" in message
    assert "delete it and create it again with the new shape" in message


def test_a_request_for_another_resource_or_no_subresource_is_not_judged() -> None:
    lookup = in_cache(pytorch_job(), admitted=True)
    other = scale_request() | {
        "resource": {"group": "apps", "version": "v1", "resource": "deployments"}
    }
    assert decide(lookup, other)["allowed"] is True
    whole = scale_request() | {"subResource": ""}
    assert decide(lookup, whole)["allowed"] is True


async def test_the_route_reads_a_job_the_cache_lacks_before_it_decides() -> None:
    """Scaled right after it started: the watch has not brought the job yet; the server's
    prepare step reads it, and the running job's scale is refused."""
    lookup = InMemoryLookup(api_server={KEY: pytorch_job(suspended=False)})
    body = {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": scale_request(),
    }
    async with TestClient(TestServer(make_app(lookup))) as client:
        response = await client.post(names.WEBHOOK_PATH_VALIDATE_SCALE, json=body)
        answer = (await response.json())["response"]
    assert answer["allowed"] is False
    assert "while it is admitted" in answer["status"]["message"]
