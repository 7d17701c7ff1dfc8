"""A second kind through the shared pieces: the webhooks queue it and name it in refusals,
its shape is compared pod set by pod set, and placement lands in each of its templates."""

from __future__ import annotations

import copy
from typing import Any

from e2e.widget_kind import GROUP, Widget, widget
from queuectl.api import names
from queuectl.jobs import PodSetPlacement
from queuectl.jobs.podtemplate import AFFINITY_KEY
from queuectl.jobs.registry import KINDS
from queuectl.jobs.shape import shape_changes
from queuectl.webhooks.jobs import mutate_job, validate_job
from queuectl.webhooks.lookup import InMemoryLookup
from queuectl.webhooks.review import decode_patch, escape_pointer

KIND = Widget()
REGISTRY = KINDS.with_kinds(KIND)
NS = "team-a"
LOOKUP = InMemoryLookup(local_queues={(NS, "lq"): "cq-a"})
GVK = {"group": GROUP, "version": "v1", "kind": "Widget"}


def review(obj: dict[str, Any], old: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "uid": "u",
        "kind": GVK,
        "operation": "UPDATE" if old is not None else "CREATE",
        "name": obj["metadata"]["name"],
        "namespace": NS,
        "userInfo": {"username": "alice"},
        "object": obj,
        "oldObject": old,
    }


def test_the_webhook_suspends_a_queued_widget_on_create() -> None:
    response = mutate_job(review(widget("w", NS, "lq", workers=2, gpus=4)), LOOKUP, REGISTRY)
    ops = decode_patch(response)
    assert {"op": "add", "path": "/spec/suspend", "value": True} in ops
    cq_label = "/metadata/labels/" + escape_pointer(names.LABEL_CLUSTER_QUEUE)
    assert {"op": "add", "path": cq_label, "value": "cq-a"} in ops


def test_a_kind_not_registered_is_let_through_untouched() -> None:
    response = mutate_job(review(widget("w", NS, "lq", workers=2, gpus=4)), LOOKUP)
    assert response["allowed"] is True and "patch" not in response


def test_a_refusal_names_the_kind_and_its_suspend_field() -> None:
    obj = widget("w", NS, "lq", workers=2, gpus=4)
    response = validate_job(review(obj), LOOKUP, kinds=REGISTRY)
    message = response["status"]["message"]
    assert message.startswith(
        f"Widget {NS}/w: a Widget queued in LocalQueue 'lq' must be created with spec.suspend=true"
    ), message


def test_resizing_one_role_of_a_running_widget_is_refused_naming_that_role() -> None:
    old = widget("w", NS, "lq", workers=2, gpus=4)
    new = copy.deepcopy(old)
    new["spec"]["workers"] = 3
    assert shape_changes(KIND, old, new) == [
        "pod set 'workers': the pods it runs at once (workers) from 2 to 3"
    ]
    response = validate_job(review(new, old), LOOKUP, kinds=REGISTRY)  # old is running
    assert (
        "pod set 'workers': the pods it runs at once (workers) from 2 to 3"
        in (response["status"]["message"])
    )


def test_placement_lands_in_every_template_and_restores_from_the_workload() -> None:
    job = widget("w", NS, "lq", workers=2, gpus=4)
    pod_sets = KIND.workload_spec(job)["podSets"]
    placements = [
        PodSetPlacement("leader", {"gpu": "h100"}),
        PodSetPlacement("workers", {"gpu": "h100"}, domain={"rack": ("r1",)}),
    ]
    patch = KIND.run_patch(job, pod_sets, placements)
    assert patch["spec"]["suspend"] is False
    leader = patch["spec"]["leaderTemplate"]["spec"]["affinity"]["nodeAffinity"][AFFINITY_KEY]
    workers = patch["spec"]["workerTemplate"]["spec"]["affinity"]["nodeAffinity"][AFFINITY_KEY]
    assert leader["nodeSelectorTerms"][0]["matchExpressions"] == [
        {"key": "gpu", "operator": "In", "values": ["h100"]}
    ]
    assert {"key": "rack", "operator": "In", "values": ["r1"]} in (
        workers["nodeSelectorTerms"][0]["matchExpressions"]
    )
    running = copy.deepcopy(job)
    for template in ("leaderTemplate", "workerTemplate"):
        running["spec"][template]["spec"].update(patch["spec"][template]["spec"])
    restore = KIND.restore_patch(running, pod_sets)
    assert restore is not None
    restored = restore["spec"]["workerTemplate"]["spec"]
    assert restored["affinity"]["nodeAffinity"][AFFINITY_KEY] is None
    assert KIND.restore_patch(job, pod_sets) is None
