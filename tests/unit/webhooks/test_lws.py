"""LeaderWorkerSet through the webhooks: the LWS's queue label reaches its leader and worker
templates; each pod it makes is gated and named into its replica's group (`<lws>-<index>`,
`size` pods), so every replica is admitted as one gang of its own."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import yaml
from webhook_cases import NS, apply_patch, request

from queuectl.api import names
from queuectl.jobs import podgroup as pg
from queuectl.webhooks.lookup import InMemoryLookup
from queuectl.webhooks.pods import mutate_lws, mutate_pod, validate_pod
from queuectl.webhooks.review import decode_patch

SAMPLE = Path(__file__).parents[3] / "config" / "samples" / "kinds" / "leaderworkerset.yaml"
LWS_KIND = {"group": "leaderworkerset.x-k8s.io", "version": "v1", "kind": "LeaderWorkerSet"}
POD_KIND = {"group": "", "version": "v1", "kind": "Pod"}


def lws() -> dict[str, Any]:
    out: dict[str, Any] = yaml.safe_load(SAMPLE.read_text())
    out["metadata"]["namespace"] = NS
    return out


def test_the_queue_and_priority_labels_reach_both_templates() -> None:
    obj = lws()
    response = mutate_lws(request(obj, kind=LWS_KIND))
    out = apply_patch(obj, decode_patch(response))
    for name in ("leaderTemplate", "workerTemplate"):
        labels = out["spec"]["leaderWorkerTemplate"][name]["metadata"]["labels"]
        assert labels == {
            names.LABEL_QUEUE_NAME: "training",
            names.LABEL_PRIORITY_CLASS: "research",
        }
    worker = out["spec"]["leaderWorkerTemplate"]["workerTemplate"]
    assert worker["metadata"]["annotations"]  # the topology request is kept
    again = mutate_lws(request(out, kind=LWS_KIND))
    assert decode_patch(again) == []


def test_an_unqueued_lws_is_left_alone() -> None:
    obj = lws()
    obj["metadata"]["labels"] = {}
    assert decode_patch(mutate_lws(request(obj, kind=LWS_KIND))) == []


def lws_pod(index: str = "1", worker: str = "2") -> dict[str, Any]:
    """A worker pod as the worker StatefulSet makes it (the LWS controller's labels)."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"vllm-{index}-{worker}",
            "namespace": NS,
            "labels": {
                names.LABEL_QUEUE_NAME: "gpu",
                pg.LWS_NAME: "vllm",
                pg.LWS_GROUP_INDEX: index,
                "leaderworkerset.sigs.k8s.io/worker-index": worker,
            },
            "annotations": {pg.LWS_SIZE: "4"},
            "ownerReferences": [
                {"kind": "StatefulSet", "name": f"vllm-{index}", "uid": "s", "controller": True}
            ],
        },
        "spec": {"containers": [{"name": "worker", "image": "x"}]},
    }


def test_each_lws_pod_is_gated_into_its_replicas_group(lookup: InMemoryLookup) -> None:
    pod = lws_pod()
    response = mutate_pod(request(pod, kind=POD_KIND), lookup)
    out = apply_patch(pod, decode_patch(response))
    assert pg.is_gated(out)
    assert out["metadata"]["labels"][names.LABEL_POD_GROUP_NAME] == "vllm-1"
    assert out["metadata"]["labels"][names.LABEL_CLUSTER_QUEUE] == "cq-a"
    assert out["metadata"]["annotations"][names.ANNOTATION_POD_GROUP_TOTAL_COUNT] == "4"
    assert pg.group_of(out) == pg.GroupKey(NS, "vllm-1")
    assert validate_pod(request(out, kind=POD_KIND), lookup)["allowed"] is True
    ungated = copy.deepcopy(out)
    ungated["spec"].pop("schedulingGates")
    refused = validate_pod(request(ungated, out, kind=POD_KIND), lookup)
    assert refused["allowed"] is False


def test_a_leader_without_its_group_index_yet_waits_for_the_lws_webhook(
    lookup: InMemoryLookup,
) -> None:
    pod = lws_pod()
    del pod["metadata"]["labels"][pg.LWS_GROUP_INDEX]  # LWS's own pod webhook adds it
    assert not pg.is_queued_pod(pod)
    assert decode_patch(mutate_pod(request(pod, kind=POD_KIND), lookup)) == []


def test_a_long_lws_name_still_makes_a_label_value() -> None:
    pod = lws_pod(index="12")
    pod["metadata"]["labels"][pg.LWS_NAME] = "x" * 63
    found = pg.lws_group(pod)
    assert found is not None and len(found[0]) <= 63 and found[0].endswith("-12")
