"""Per-pod pins: each pod of a sliced (or balanced) gang goes to the node the core chose for it.

The whole path, as pure functions: the core places the gang; the admission goes through the
Workload's status and back (as after a controller restart: only the domains, in pod order, are
kept; the slices are read from the spec); the Job gets the pins on its template; each pod, made
from the template with its completion index, is pinned by the pod webhook to its own node.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Sequence
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from queuectl import convert
from queuectl.api import names
from queuectl.controller.admission import placement
from queuectl.core import GPU, Node, TopologyAssignment, TopologyRequest
from queuectl.core import types as core
from queuectl.core.topology import node_capacity, place
from queuectl.jobs import PodSetPlacement, pinning
from queuectl.jobs.batch import BatchJob
from queuectl.jobs.jobset import JobSet
from queuectl.jobs.pytorch import PyTorchJob
from queuectl.webhooks.pinned import mutate_pinned_pod, pin_ops
from tests.unit.jobs.jobs_helpers import apply_merge, required

BLOCK, RACK, NVL, HOST = (
    names.LABEL_TOPOLOGY_BLOCK,
    names.LABEL_TOPOLOGY_RACK,
    names.LABEL_GPU_CLIQUE,
    names.LABEL_HOSTNAME,
)
LEVELS = (BLOCK, RACK, NVL, HOST)
FLAVOR = {"metadata": {"name": "h100"}, "spec": {"nodeLabels": {"gpu": "h100"}}}


def fleet(free: dict[tuple[str, str], Sequence[int]]) -> list[Node]:
    """(rack, NVLink domain) -> free 8-GPU pods on each of its nodes, all in block b1."""
    out = []
    for (rack, nvl), pods in free.items():
        for i, f in enumerate(pods):
            name = f"{rack}-{nvl}-n{i}"
            labels = {BLOCK: "b1", RACK: rack, NVL: f"{rack}-{nvl}", HOST: name}
            out.append(Node(name, labels, {GPU: 16}, {GPU: 16 - 8 * f}))
    return out


def admitted(
    nodes: list[Node], count: int, request: TopologyRequest
) -> tuple[core.Admission, list[dict[str, Any]]]:
    """The core's placement of `count` 8-GPU pods, read back from the Workload's status, and
    the Workload's spec.podSets (what the controller has after a restart)."""
    caps = {n.name: node_capacity(n) for n in nodes}
    topo = place(nodes, caps, {}, LEVELS, request, count, {GPU: 8})
    assert isinstance(topo, TopologyAssignment), topo
    adm = core.Admission(
        "cq", (core.PodSetAssignment("main", count, {GPU: "h100"}, {GPU: 8 * count}, topo),)
    )
    status = json.loads(json.dumps(convert.admission_to_status(adm)))
    topology_request: dict[str, Any] = {"required": request.required}
    if request.slices:
        topology_request["podSetSliceRequiredTopologyConstraints"] = [
            {"topology": lv, "size": size} for lv, size in request.slices
        ]
    if request.balanced:
        topology_request["balancedPlacement"] = True
    pod_sets = [{"name": "main", "count": count, "topologyRequest": topology_request}]
    return convert.admission_from_status(status), pod_sets


def indexed_job(count: int) -> dict[str, Any]:
    template = {"spec": {"containers": [{"name": "main", "image": "x"}]}}
    return {
        "metadata": {"name": "gang", "namespace": "ns"},
        "spec": {
            "suspend": True,
            "completionMode": "Indexed",
            "completions": count,
            "parallelism": count,
            "template": template,
        },
    }


def pods_of(template: dict[str, Any], count: int, labels: Any = None) -> list[dict[str, Any]]:
    """The pods the Job controller makes from `template`, index label set (`labels(i)` adds
    more), each as the pod webhook leaves it."""
    out = []
    for i in range(count):
        pod = copy.deepcopy(template)
        meta = pod.setdefault("metadata", {})
        meta["labels"] = {names.LABEL_JOB_COMPLETION_INDEX: str(i), **(labels(i) if labels else {})}
        out.append(apply_json_patch(pod, pin_ops(pod)))
    return out


def apply_json_patch(pod: dict[str, Any], ops: list[dict[str, Any]]) -> dict[str, Any]:
    out = copy.deepcopy(pod)
    for op in ops:
        assert op["op"] == "add" and op["path"] == "/spec/affinity"
        out["spec"]["affinity"] = op["value"]
    return out


def pinned_host(pod: dict[str, Any]) -> str:
    """The one host every required term of the pod allows."""
    hosts = set()
    for term in required(pod["spec"])["nodeSelectorTerms"]:
        for expr in term["matchExpressions"]:
            if expr["key"] == HOST:
                hosts.add(tuple(expr["values"]))
    [(host,)] = hosts
    return str(host)


def started(job: dict[str, Any], adm: core.Admission, pod_sets: list[dict[str, Any]]) -> Any:
    """The Job after the controller's run_patch for this admission."""
    placed = placement.placements(adm, {"h100": FLAVOR}, pod_sets)
    recorded = [{"name": "main", "template": job["spec"]["template"]}]
    return apply_merge(job, BatchJob().run_patch(job, recorded, placed))


def test_a_64_gpu_gang_in_slices_of_2_per_nvlink_domain_is_pinned_pod_by_pod() -> None:
    # Three NVLink domains of two nodes in each of two racks; one node already half busy.
    nodes = fleet(
        {("r1", "a"): [2, 1], ("r1", "b"): [2, 2], ("r2", "a"): [2, 2], ("r2", "b"): [2, 2]}
    )
    request = TopologyRequest(required=BLOCK, slices=((NVL, 2),))
    adm, pod_sets = admitted(nodes, 8, request)
    job = started(indexed_job(8), adm, pod_sets)
    assert job["spec"]["suspend"] is False
    pods = pods_of(job["spec"]["template"], 8)
    chosen = [d.values[-1] for d in adm.podsets[0].topology.domains for _ in range(d.count)]  # type: ignore[union-attr]
    assert [pinned_host(p) for p in pods] == chosen
    clique = {n.name: n.labels[NVL] for n in nodes}
    for j in range(4):
        assert clique[chosen[2 * j]] == clique[chosen[2 * j + 1]], (j, chosen)
    # The block is still in the template for every pod, pinned or not.
    for term in required(job["spec"]["template"]["spec"])["nodeSelectorTerms"]:
        assert {"key": BLOCK, "operator": "In", "values": ["b1"]} in term["matchExpressions"]


def test_a_balanced_gang_is_pinned_as_evenly_as_it_was_promised() -> None:
    # Two racks with room for 4 pods each: best fit packs 4 and 2, balance promises 3 and 3.
    nodes = fleet({("r1", "a"): [2, 2], ("r2", "a"): [2, 2]})
    adm, pod_sets = admitted(nodes, 6, TopologyRequest(required=BLOCK, balanced=True))
    pods = pods_of(started(indexed_job(6), adm, pod_sets)["spec"]["template"], 6)
    racks = [pinned_host(p).split("-")[0] for p in pods]
    assert sorted(racks.count(r) for r in set(racks)) == [3, 3]


def test_a_gang_without_slices_or_balance_is_not_pinned() -> None:
    nodes = fleet({("r1", "a"): [2, 2]})
    adm, pod_sets = admitted(nodes, 4, TopologyRequest(required=RACK))
    job = started(indexed_job(4), adm, pod_sets)
    assert names.ANNOTATION_POD_PINS not in (job["spec"]["template"].get("metadata") or {}).get(
        "annotations", {}
    )


def test_only_an_indexed_job_running_all_its_completions_at_once_carries_pins() -> None:
    nodes = fleet({("r1", "a"): [2, 2]})
    adm, pod_sets = admitted(nodes, 4, TopologyRequest(required=BLOCK, slices=((NVL, 2),)))
    cases = {
        "indexed gang": ({}, True),
        "NonIndexed: no index names a place": ({"completionMode": "NonIndexed"}, False),
        "more completions than run at once": ({"completions": 8}, False),
    }
    for what, (change, pinned) in cases.items():
        job = indexed_job(4)
        job["spec"].update(change)
        annotations = (started(job, adm, pod_sets)["spec"]["template"].get("metadata") or {}).get(
            "annotations", {}
        )
        assert (names.ANNOTATION_POD_PINS in annotations) is pinned, what


def test_restoring_a_stopped_job_takes_its_pins_away() -> None:
    nodes = fleet({("r1", "a"): [2, 2]})
    adm, pod_sets = admitted(nodes, 4, TopologyRequest(required=BLOCK, slices=((NVL, 2),)))
    original = indexed_job(4)
    job = started(original, adm, pod_sets)
    recorded = [{"name": "main", "template": original["spec"]["template"]}]
    patch = BatchJob().restore_patch({**job, "spec": {**job["spec"], "suspend": True}}, recorded)
    assert patch is not None
    restored = apply_merge(job, patch)
    assert names.ANNOTATION_POD_PINS not in (
        restored["spec"]["template"].get("metadata") or {}
    ).get("annotations", {})


def test_a_jobset_pod_finds_its_place_from_its_child_jobs_index_and_its_own() -> None:
    pins = PodSetPlacement(
        "workers",
        pins=pinning.pins_of([(2, {HOST: f"n{i}"}) for i in range(4)]),
    )
    jobset = {
        "metadata": {"name": "js", "namespace": "ns"},
        "spec": {
            "suspend": True,
            "replicatedJobs": [
                {
                    "name": "workers",
                    "replicas": 4,
                    "template": {
                        "spec": {
                            "parallelism": 2,
                            "completions": 2,
                            "template": {"spec": {"containers": [{"name": "c"}]}},
                        }
                    },
                }
            ],
        },
    }
    patch = JobSet().run_patch(jobset, [], [pins])
    template = patch["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]
    for child in range(4):
        pods = pods_of(template, 2, lambda _, c=child: {names.LABEL_JOBSET_JOB_INDEX: str(c)})
        assert {pinned_host(p) for p in pods} == {f"n{child}"}
    restored = JobSet().restore_patch(apply_merge(jobset, patch), [])
    assert restored is None or names.ANNOTATION_POD_PINS not in json.dumps(restored)


def test_the_pod_webhook_leaves_alone_pods_without_pins_or_past_them() -> None:
    placement_ = PodSetPlacement("main", pins=pinning.pins_of([(2, {HOST: "n1"})]))
    value = pinning.annotation(placement_, pinning.INDEXED_JOB)
    assert value is not None
    plain = {"metadata": {"labels": {names.LABEL_JOB_COMPLETION_INDEX: "0"}}, "spec": {}}
    assert pin_ops(plain) == []
    beyond = copy.deepcopy(plain)
    beyond["metadata"]["annotations"] = {names.ANNOTATION_POD_PINS: value}
    beyond["metadata"]["labels"][names.LABEL_JOB_COMPLETION_INDEX] = "2"
    assert pin_ops(beyond) == []
    garbled = copy.deepcopy(plain)
    garbled["metadata"]["annotations"] = {names.ANNOTATION_POD_PINS: "{not json"}
    assert pin_ops(garbled) == []
    # An update is never touched; a create is pinned once, even when the webhook runs again.
    first = copy.deepcopy(plain)
    first["metadata"]["annotations"] = {names.ANNOTATION_POD_PINS: value}
    assert "patch" not in mutate_pinned_pod({"uid": "u", "operation": "UPDATE", "object": first})
    assert "patch" in mutate_pinned_pod({"uid": "u", "operation": "CREATE", "object": first})
    once = apply_json_patch(first, pin_ops(first))
    assert pin_ops(once) == []


def test_the_pin_keeps_the_pods_own_affinity_terms_and_pod_affinity() -> None:
    placement_ = PodSetPlacement("main", pins=pinning.pins_of([(1, {HOST: "n1", NVL: "c1"})]))
    value = pinning.annotation(placement_, pinning.INDEXED_JOB)
    assert value is not None
    term = {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}
    other = {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["b"]}]}
    pod_affinity = {"requiredDuringSchedulingIgnoredDuringExecution": [{"topologyKey": HOST}]}
    pod = {
        "metadata": {
            "labels": {names.LABEL_JOB_COMPLETION_INDEX: "0"},
            "annotations": {names.ANNOTATION_POD_PINS: value},
        },
        "spec": {
            "affinity": {
                "podAntiAffinity": pod_affinity,
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [term, other]
                    },
                    "preferredDuringSchedulingIgnoredDuringExecution": [
                        {"weight": 1, "preference": term}
                    ],
                },
            }
        },
    }
    out = apply_json_patch(pod, pin_ops(pod))["spec"]["affinity"]
    assert out["podAntiAffinity"] == pod_affinity
    assert out["nodeAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"]
    terms = out["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"
    ]
    assert len(terms) == 2  # each original term (ORed) carries the pin (ANDed)
    for t in terms:
        assert {"key": HOST, "operator": "In", "values": ["n1"]} in t["matchExpressions"]
        assert {"key": NVL, "operator": "In", "values": ["c1"]} in t["matchExpressions"]


@settings(max_examples=60, deadline=None)
@given(
    free=st.lists(st.integers(0, 2), min_size=4, max_size=12),
    slice_size=st.sampled_from([1, 2, 4]),
    slices=st.integers(1, 4),
    balanced=st.booleans(),
)
def test_every_pod_is_pinned_to_the_node_at_its_place_in_the_core_s_order(
    free: list[int], slice_size: int, slices: int, balanced: bool
) -> None:
    """Whatever the fleet and the slices, pod i is pinned to the i-th pod's node of the
    assignment, and the pods of one slice share its NVLink domain."""
    layout: dict[tuple[str, str], list[int]] = {}
    for i, f in enumerate(free):
        layout.setdefault((f"r{i // 4}", f"v{(i % 4) // 2}"), []).append(f)
    nodes = fleet(layout)
    count = slice_size * slices
    request = TopologyRequest(required=BLOCK, slices=((NVL, slice_size),), balanced=balanced)
    caps = {n.name: node_capacity(n) for n in nodes}
    if not isinstance(place(nodes, caps, {}, LEVELS, request, count, {GPU: 8}), TopologyAssignment):
        return  # no room: nothing to pin
    adm, pod_sets = admitted(nodes, count, request)
    pods = pods_of(started(indexed_job(count), adm, pod_sets)["spec"]["template"], count)
    topo = adm.podsets[0].topology
    assert topo is not None
    chosen = [d.values[-1] for d in topo.domains for _ in range(d.count)]
    hosts = [pinned_host(p) for p in pods]
    assert hosts == chosen
    clique = {n.name: n.labels[NVL] for n in nodes}
    for j in range(slices):
        assert len({clique[h] for h in hosts[j * slice_size : (j + 1) * slice_size]}) == 1


def test_a_pytorchjobs_workers_are_pinned_by_their_replica_index() -> None:
    job = {
        "metadata": {"name": "train", "namespace": "ns", "uid": "u"},
        "spec": {
            "runPolicy": {"suspend": True},
            "pytorchReplicaSpecs": {
                "Worker": {
                    "replicas": 4,
                    "template": {"spec": {"containers": [{"name": "pytorch"}]}},
                }
            },
        },
    }
    workers = PodSetPlacement(
        "worker", pins=pinning.pins_of([(2, {HOST: "n0"}), (2, {HOST: "n1"})])
    )
    placed = apply_merge(job, PyTorchJob().run_patch(job, [], [workers]))
    template = placed["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]
    hosts = []
    for i in range(4):
        pod = copy.deepcopy(template)
        pod["metadata"]["labels"] = {names.LABEL_KUBEFLOW_REPLICA_INDEX: str(i)}
        hosts.append(pinned_host(apply_json_patch(pod, pin_ops(pod))))
    assert hosts == ["n0", "n0", "n1", "n1"]
    restored = PyTorchJob().restore_patch(placed, [])
    assert restored is not None
    after = apply_merge(placed, restored)["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]
    assert names.ANNOTATION_POD_PINS not in (after.get("metadata") or {}).get("annotations", {})
