"""The controller's cache answers the webhooks' ownership questions (`owner_object`) and, for
a claim it cannot confirm, reads the owner from the API server once (`read_owner`): JobSet
makes its Jobs the moment it is created, before the watch may have brought the JobSet, and a
JobSet deleted and created again under the same name has a new uid the cache may not know."""

from __future__ import annotations

import copy
from typing import Any

from queuectl.api import names
from queuectl.controller.watch import kube as k
from queuectl.jobs.jobset import JOBSETS
from queuectl.webhooks.jobs import mutate_job, read_inputs
from tests.unit.controller.controller_fakes import World

POD = {"spec": {"containers": [{"name": "c", "image": "busybox"}]}}
JOBSET = {
    "apiVersion": "jobset.x-k8s.io/v1alpha2",
    "kind": "JobSet",
    "metadata": {"name": "js", "namespace": "ns", "labels": {names.LABEL_QUEUE_NAME: "lq"}},
    "spec": {"replicatedJobs": [{"name": "w", "template": {"spec": {"template": POD}}}]},
}


def child_review(owner: dict[str, Any]) -> dict[str, Any]:
    meta = owner["metadata"]
    ref = {"apiVersion": owner["apiVersion"], "kind": "JobSet", "name": meta["name"]}
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": "js-w-0",
            "namespace": "ns",
            "ownerReferences": [{**ref, "uid": meta["uid"], "controller": True}],
        },
        "spec": {"template": copy.deepcopy(POD)},
    }
    return {
        "uid": "r",
        "kind": {"group": "batch", "version": "v1", "kind": "Job"},
        "operation": "CREATE",
        "namespace": "ns",
        "name": "js-w-0",
        "userInfo": {"username": "system:serviceaccount:jobset-system:jobset-controller-manager"},
        "object": job,
    }


async def test_an_owner_the_watch_has_not_brought_yet_is_read_once() -> None:
    w = World()
    w.add(
        k.LOCAL_QUEUES,
        {"metadata": {"name": "default", "namespace": "ns"}, "spec": {"clusterQueue": "cq"}},
    )
    owner = w.kube.put(JOBSETS, JOBSET)  # in the API server, not yet in the cache
    review = child_review(owner)
    assert "patch" in mutate_job(review, w.cache), "unconfirmed: queued on its own"
    await read_inputs(review, w.cache)
    assert w.cache.owner_object(JOBSETS, "ns", "js") == owner
    assert "patch" not in mutate_job(review, w.cache)


async def test_an_owner_created_again_under_its_name_is_read_for_its_new_uid() -> None:
    w = World()
    w.add(
        k.LOCAL_QUEUES,
        {"metadata": {"name": "default", "namespace": "ns"}, "spec": {"clusterQueue": "cq"}},
    )
    w.add(JOBSETS, {**JOBSET, "metadata": {**JOBSET["metadata"], "uid": "uid-before"}})
    again = w.kube.put(JOBSETS, {**JOBSET, "metadata": {**JOBSET["metadata"], "uid": "uid-after"}})
    review = child_review(again)
    await read_inputs(review, w.cache)
    assert "patch" not in mutate_job(review, w.cache)


async def test_a_claim_nothing_stands_behind_stays_unconfirmed() -> None:
    w = World()
    w.add(
        k.LOCAL_QUEUES,
        {"metadata": {"name": "default", "namespace": "ns"}, "spec": {"clusterQueue": "cq"}},
    )
    ghost = {**JOBSET, "metadata": {**JOBSET["metadata"], "uid": "uid-ghost"}}
    review = child_review(ghost)
    await read_inputs(review, w.cache)
    assert w.cache.owner_object(JOBSETS, "ns", "js") is None
    assert "patch" in mutate_job(review, w.cache)
