"""What a kind reads its pod sets from (a TrainJob's runtimes) is held by the controller's
cache like the kinds themselves: watched once served, and answered to the webhooks' lookup."""

from __future__ import annotations

import copy
import json
from typing import Any

from aiohttp.test_utils import TestClient, TestServer

from queuectl.api import names
from queuectl.controller.watch.cache import Cache
from queuectl.controller.watch.kinds import KindWatches
from queuectl.jobs.registry import KINDS
from queuectl.jobs.trainjob import CLUSTER_RUNTIMES, RUNTIMES, TRAIN_JOBS
from queuectl.webhooks.review import decode_patch
from queuectl.webhooks.server import make_app
from tests.unit.controller.controller_fakes import FakeKube
from tests.unit.jobs.trainjob_cases import docs
from tests.unit.webhooks.webhook_cases import apply_patch


def test_the_runtimes_are_watched_beside_the_kinds_and_answer_the_webhooks() -> None:
    cache = Cache.for_kinds(None, KINDS.values())  # type: ignore[arg-type]
    watches = KindWatches(None, cache, KINDS.values())  # type: ignore[arg-type]
    assert {TRAIN_JOBS, CLUSTER_RUNTIMES, RUNTIMES} <= set(watches.resources)
    assert CLUSTER_RUNTIMES not in cache.job_kinds  # not a kind: no pod is ever owned by one
    runtime: dict[str, Any] = docs()["torch-distributed"]
    runtime["metadata"]["resourceVersion"] = "1"
    cache.store(CLUSTER_RUNTIMES).apply("ADDED", runtime)
    assert cache.input_object(CLUSTER_RUNTIMES, "", "torch-distributed") == runtime
    assert cache.input_object(RUNTIMES, "team-a", "torch-distributed") is None


def trainjob_review(job: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "u",
            "kind": {"group": TRAIN_JOBS.group, "version": TRAIN_JOBS.version, "kind": "TrainJob"},
            "operation": "CREATE",
            "namespace": "team-a",
            "name": job["metadata"]["name"],
            "userInfo": {"username": "alice"},
            "object": job,
        },
    }


async def mutate(
    cache: Cache, job: dict[str, Any], path: str = names.WEBHOOK_PATH_MUTATE_JOB
) -> dict[str, Any]:
    async with TestClient(TestServer(make_app(cache))) as client:
        http = await client.post(path, json=trainjob_review(job))
        answer: dict[str, Any] = (await http.json())["response"]
        return answer


async def test_a_runtime_applied_with_its_trainjob_is_read_before_the_watch_delivers_it() -> None:
    """`kubectl apply -f runtime.yaml -f trainjob.yaml`: the runtime exists in the API server
    but the watch has not brought it to the cache when the TrainJob's webhook call arrives."""
    kube = FakeKube()
    kube.put(CLUSTER_RUNTIMES, docs()["torch-distributed"])
    cache = Cache.for_kinds(kube, KINDS.values())  # type: ignore[arg-type]
    answer = await mutate(cache, docs()["pretrain"])
    assert answer["allowed"] is True, answer
    made = apply_patch(docs()["pretrain"], decode_patch(answer))
    assert names.ANNOTATION_TRAINJOB_RUNTIME in made["metadata"]["annotations"]
    assert cache.input_object(CLUSTER_RUNTIMES, "", "torch-distributed") is not None


async def test_a_runtime_that_exists_nowhere_is_still_refused_by_name() -> None:
    cache = Cache.for_kinds(FakeKube(), KINDS.values())  # type: ignore[arg-type]
    answer = await mutate(cache, docs()["pretrain"])
    assert answer["allowed"] is False
    assert "'torch-distributed'" in answer["status"]["message"]
    assert "does not exist" in answer["status"]["message"]


async def test_a_runtime_changed_just_before_its_trainjob_is_recorded_as_it_stands_now() -> None:
    """An admin changes the runtime and a user creates a TrainJob at once: neither webhook's
    cache has the change yet (two replicas, each behind its own watch). The record is the
    runtime as the API server has it, what trainer will build the JobSet from, and the
    validating webhook accepts that record rather than refusing the user's create as forged."""
    kube = FakeKube()
    before: dict[str, Any] = docs()["torch-distributed"]
    before["metadata"]["resourceVersion"] = "1"
    now = docs()["torch-distributed"]
    now["spec"]["mlPolicy"]["torch"]["numProcPerNode"] = 4
    kube.put(CLUSTER_RUNTIMES, now)
    mutating, validating = (Cache.for_kinds(kube, KINDS.values()) for _ in range(2))  # type: ignore[arg-type]
    for replica in (mutating, validating):
        replica.store(CLUSTER_RUNTIMES).apply("ADDED", copy.deepcopy(before))

    answer = await mutate(mutating, docs()["pretrain"])
    assert answer["allowed"] is True, answer
    made = apply_patch(docs()["pretrain"], decode_patch(answer))
    record = json.loads(made["metadata"]["annotations"][names.ANNOTATION_TRAINJOB_RUNTIME])
    assert record["mlPolicy"]["torch"]["numProcPerNode"] == 4

    verdict = await mutate(validating, made, names.WEBHOOK_PATH_VALIDATE_JOB)
    assert verdict["allowed"] is True, verdict
