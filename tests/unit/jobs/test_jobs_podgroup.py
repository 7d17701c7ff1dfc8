"""Plain pod groups, read from pods shaped like the sample (a driver and three GPU workers):
which pods are queued, when the group is complete, its pod sets by shape, and the patch that
lets an admitted pod schedule."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from queuectl.api import names
from queuectl.api.resource import Obj
from queuectl.jobs import pinning
from queuectl.jobs import podgroup as pg
from queuectl.jobs.kind import PodPin, PodSetPlacement

SAMPLE = Path(__file__).parents[3] / "config" / "samples" / "31-pod-group.yaml"


def sample() -> list[Obj]:
    pods = [d for d in yaml.safe_load_all(SAMPLE.read_text()) if d]
    for i, pod in enumerate(pods):  # as the API server returns them: a uid, its own token volume
        pod["metadata"]["uid"] = f"uid-{i}"
        pod["spec"]["volumes"] = [{"name": f"kube-api-access-{i}", "projected": {}}]
        pod["spec"]["schedulingGates"] = [{"name": pg.GATE}]
        pod["status"] = {"phase": "Pending"}
    return pods


def single(name: str = "notebook", **labels: str) -> Obj:
    return {
        "metadata": {
            "name": name,
            "namespace": "ns",
            "uid": "u1",
            "labels": {names.LABEL_QUEUE_NAME: "q", **labels},
        },
        "spec": {"containers": [{"name": "c", "image": "x"}]},
    }


def test_the_sample_group_is_one_driver_and_three_workers() -> None:
    pods = sample()
    key = pg.group_of(pods[0])
    assert key == pg.GroupKey("team-llm", "sweep", False)
    assert {pg.group_of(p) for p in pods} == {key}
    sets = pg.pod_sets(pods)
    assert sorted(ps.count for ps in sets) == [1, 3]
    assert sets == sorted(sets, key=lambda ps: ps.name)  # stable order
    assert pg.pod_sets(list(reversed(pods))) == sets
    worker = next(ps for ps in sets if ps.count == 3)
    assert worker.template["spec"]["containers"] == [
        {
            "name": "worker",
            "resources": {
                "requests": {"cpu": "96", "memory": "1Ti"},
                "limits": {"nvidia.com/gpu": "8"},
            },
        }
    ]


def test_a_group_waits_for_its_last_pod_and_refuses_extra_ones() -> None:
    pods = sample()
    key = pg.group_of(pods[0])
    assert pg.readiness(key, pods[:3]) == pg.Readiness(
        False, "3 of 4 pods exist; waiting for the rest"
    )
    assert pg.readiness(key, pods).ready
    extra = copy.deepcopy(pods[1])
    extra["metadata"]["name"] = "sweep-worker-3"
    why = pg.readiness(key, [*pods, extra]).why
    assert "5 pods" in why and "delete the extra pods" in why


def test_finished_and_deleting_pods_do_not_count() -> None:
    pods = sample()
    pods[1]["status"]["phase"] = "Failed"
    pods[2]["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    assert pg.readiness(pg.group_of(pods[0]), pods).why == "2 of 4 pods exist; waiting for the rest"
    assert sum(ps.count for ps in pg.pod_sets(pods)) == 2


def test_pods_that_disagree_on_the_count_get_no_workload() -> None:
    pods = sample()
    pods[3]["metadata"]["annotations"][names.ANNOTATION_POD_GROUP_TOTAL_COUNT] = "3"
    assert "disagree" in pg.readiness(pg.group_of(pods[0]), pods).why


def test_a_pod_without_a_group_name_is_a_group_of_one() -> None:
    pod = single()
    key = pg.group_of(pod)
    assert key == pg.GroupKey("ns", "notebook", True)
    assert pg.total_count(pod) == 1 and pg.readiness(key, [pod]).ready
    assert pg.workload_name(key, "u1") != pg.workload_name(key, "u2")  # recreated pod: new job
    assert pg.workload_name(key, "u1").startswith("pod-notebook-")


def test_a_groups_workload_name_is_stable_across_replacement_pods() -> None:
    key = pg.GroupKey("team-llm", "sweep")
    assert pg.workload_name(key, "a") == pg.workload_name(key, "b")
    assert pg.workload_name(key).startswith("podgroup-sweep-")


@pytest.mark.parametrize(
    ("labels", "annotations", "problem"),
    [
        ({}, {}, None),
        ({names.LABEL_POD_GROUP_NAME: "g"}, {names.ANNOTATION_POD_GROUP_TOTAL_COUNT: "2"}, None),
        ({names.LABEL_POD_GROUP_NAME: "g"}, {}, "needs annotation"),
        (
            {names.LABEL_POD_GROUP_NAME: "g"},
            {names.ANNOTATION_POD_GROUP_TOTAL_COUNT: "0"},
            "got '0'",
        ),
        ({}, {names.ANNOTATION_POD_GROUP_TOTAL_COUNT: "2"}, "needs label"),
    ],
    ids=["single", "group", "no-count", "zero-count", "count-without-group"],
)
def test_group_label_problems(
    labels: dict[str, str], annotations: dict[str, str], problem: str | None
) -> None:
    pod = single(**labels)
    pod["metadata"]["annotations"] = annotations
    found = pg.group_problems(pod)
    assert (found == []) if problem is None else (problem in found[0])


def test_only_bare_queue_labelled_pods_are_queued_directly() -> None:
    assert pg.is_queued_pod(single())
    owned = single()
    owned["metadata"]["ownerReferences"] = [
        {"apiVersion": "batch/v1", "kind": "Job", "name": "j", "controller": True}
    ]
    assert not pg.is_queued_pod(owned)  # its Job is queued, not its pods
    unlabelled = single()
    unlabelled["metadata"]["labels"] = {}
    assert not pg.is_queued_pod(unlabelled)


def test_workload_spec_takes_the_queue_and_priority_from_the_pods() -> None:
    pods = sample()
    for p in pods:
        p["metadata"]["labels"][names.LABEL_PRIORITY_CLASS] = "research"
    spec = pg.group_workload_spec(pods)
    assert spec["queueName"] == "training" and spec["priorityClassName"] == "research"
    assert sorted(ps["count"] for ps in spec["podSets"]) == [1, 3]


def test_the_gate_is_added_once() -> None:
    pod = single()
    assert pg.gate_ops(pod) == [
        {"op": "add", "path": "/spec/schedulingGates", "value": [{"name": pg.GATE}]}
    ]
    pod["spec"]["schedulingGates"] = [{"name": "other"}]
    assert pg.gate_ops(pod) == [
        {"op": "add", "path": "/spec/schedulingGates/-", "value": {"name": pg.GATE}}
    ]
    pod["spec"]["schedulingGates"].append({"name": pg.GATE})
    assert pg.gate_ops(pod) == []


def test_admission_lifts_only_our_gate_and_adds_the_placement_to_each_term() -> None:
    pod = sample()[1]
    pod["spec"]["schedulingGates"].append({"name": "someone-else"})
    pod["spec"]["affinity"] = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": [{"key": "a", "operator": "Exists"}]}]
            }
        }
    }
    placement = PodSetPlacement(
        pg.pod_set_name(pg.shape(pod)),
        node_labels={"gpu": "h100"},
        tolerations=({"key": "gpu", "operator": "Exists"},),
        domain={names.LABEL_TOPOLOGY_RACK: ("rack-1",)},
    )
    assert pg.placement_for(pod, [PodSetPlacement("other"), placement]) == placement
    patch = pg.ungate_patch(pod, placement, "podgroup-sweep-1")
    assert patch["metadata"] == {
        "labels": {names.LABEL_WORKLOAD: "podgroup-sweep-1"},
        "annotations": {names.ANNOTATION_POD_SET: placement.name},
    }
    assert patch["spec"]["schedulingGates"] == [{"name": "someone-else"}]
    terms = patch["spec"]["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"
    ]["nodeSelectorTerms"]
    assert terms == [
        {
            "matchExpressions": [
                {"key": "a", "operator": "Exists"},
                {"key": "gpu", "operator": "In", "values": ["h100"]},
                {"key": names.LABEL_TOPOLOGY_RACK, "operator": "In", "values": ["rack-1"]},
            ]
        }
    ]
    assert patch["spec"]["tolerations"] == [{"key": "gpu", "operator": "Exists"}]


def test_the_last_gate_lifted_removes_the_field() -> None:
    pod: dict[str, Any] = sample()[0]
    patch = pg.ungate_patch(pod, PodSetPlacement("x"), "w")
    assert patch["spec"] == {"schedulingGates": None}


def test_pods_asking_the_same_under_other_container_names_are_one_pod_set() -> None:
    leader, worker = sample()[1], copy.deepcopy(sample()[2])
    worker["spec"]["containers"][0]["name"] = "leader"
    worker["spec"]["containers"][0]["image"] = "another"
    (ps,) = pg.pod_sets([leader, worker])
    assert ps.count == 2
    assert pg.placement_for(worker, [PodSetPlacement(ps.name, {"a": "b"})]).node_labels == {
        "a": "b"
    }


def started(pod: Obj) -> Obj:
    """The pod as admission left it: ungated, its spec placed, its pod set recorded."""
    out = copy.deepcopy(pod)
    patch = pg.ungate_patch(pod, PodSetPlacement(pg.pod_set_name(pg.shape(pod)), {"x": "y"}), "w")
    out["spec"].update({k: v for k, v in patch["spec"].items() if v is not None})
    out["spec"].pop("schedulingGates")
    out["metadata"].setdefault("annotations", {}).update(patch["metadata"]["annotations"])
    return out


def test_admission_starts_every_gated_pod_of_a_complete_group() -> None:
    pods = sample()
    sets = [{"name": ps.name, "count": ps.count} for ps in pg.pod_sets(pods)]
    assert pg.to_ungate(pods, sets) == pods


def test_a_pod_added_to_a_running_group_beyond_its_count_stays_gated() -> None:
    pods = sample()
    sets = [
        {"name": ps.name, "count": ps.count, "template": ps.template} for ps in pg.pod_sets(pods)
    ]
    placed = [PodSetPlacement(str(ps["name"]), {"x": "y"}) for ps in sets]  # as `started` did
    running = [started(p) for p in pods]
    extra = copy.deepcopy(pods[1])
    extra["metadata"]["name"] = "sweep-worker-9"
    assert pg.to_ungate([*running, extra], sets, placed) == []
    # a replacement for a worker that failed may start in its place
    running[2]["status"]["phase"] = "Failed"
    assert pg.to_ungate([*running, extra], sets, placed) == [extra]


# --- what started pods hold cannot be moved by their annotations ----------------------------
PLACED = {"gpu": "h100"}


def admitted_sets(pods: list[Obj]) -> list[Obj]:
    """The Workload's pod sets as the controller wrote them: name, count, template."""
    return [
        {"name": ps.name, "count": ps.count, "template": ps.template} for ps in pg.pod_sets(pods)
    ]


def placements(pods: list[Obj]) -> list[PodSetPlacement]:
    return [PodSetPlacement(ps.name, PLACED) for ps in pg.pod_sets(pods)]


def running_group(pods: list[Obj]) -> list[Obj]:
    """Every pod of the group as admission left it: ungated and placed on an h100 node."""
    out = []
    for pod in pods:
        patch = pg.ungate_patch(pod, pg.placement_for(pod, placements(pods)), "w")
        run = copy.deepcopy(pod)
        run["spec"].update({k: v for k, v in patch["spec"].items() if v is not None})
        run["spec"].pop("schedulingGates")
        run["metadata"].setdefault("annotations", {}).update(patch["metadata"]["annotations"])
        run["status"] = {"phase": "Running"}
        out.append(run)
    return out


def _annotate(value: str | None) -> Any:
    def edit(pod: Obj) -> None:
        annotations = pod["metadata"].setdefault("annotations", {})
        if value is None:
            annotations.pop(names.ANNOTATION_POD_SET, None)
        else:
            annotations[names.ANNOTATION_POD_SET] = value

    return edit


def _fail(pod: Obj) -> None:
    pod["status"]["phase"] = "Failed"


def _delete(pod: Obj) -> None:  # deleted, still running out its grace period
    pod["metadata"]["deletionTimestamp"] = "2026-11-27T08:00:00Z"


def _deleted_and_failed(pod: Obj) -> None:
    _delete(pod)
    _fail(pod)


def _resize_cpu(pod: Obj) -> None:  # the `resize` subresource changes CPU and memory in place
    pod["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "48"


def _driver_pod_set(pod: Obj) -> None:
    _annotate(pg.pod_set_name(pg.shape(sample()[0])))(pod)


@pytest.mark.parametrize(
    ("case", "edits", "extra_from", "starts"),
    [
        ("a worker moved to a bogus pod set", [(0, _annotate("ps-bogus"))], 1, False),
        ("a worker's pod-set annotation removed", [(0, _annotate(None))], 1, False),
        ("a worker claimed for the driver's pod set", [(0, _driver_pod_set)], 1, False),
        (
            "every worker moved to a bogus pod set",
            [(i, _annotate("x")) for i in range(3)],
            1,
            False,
        ),
        ("a worker failed: its replacement starts", [(0, _fail)], 1, True),
        ("a failed worker, moved first", [(0, _annotate("x")), (0, _fail)], 1, True),
        ("a worker failed: a second driver does not start", [(0, _fail)], 0, False),
        ("a worker resized in place, none failed", [(0, _resize_cpu)], 1, False),
        ("a resized worker, another failed", [(0, _resize_cpu), (1, _fail)], 1, True),
        ("a resized worker, a second driver", [(0, _resize_cpu), (1, _fail)], 0, False),
        # An operator remaking the group (LWS after a template change) deletes the old pods:
        # until they are gone they still hold their GPUs, so the new ones wait.
        ("a worker being deleted: its replacement waits", [(0, _delete)], 1, False),
        (
            "a deleted worker that has stopped: its replacement starts",
            [(0, _deleted_and_failed)],
            1,
            True,
        ),
    ],
)
def test_started_pods_count_by_what_they_are_not_what_they_say(
    case: str, edits: list[tuple[int, Any]], extra_from: int, starts: bool
) -> None:
    """A driver and three workers admitted and running; a user edits the running workers (the
    `queuectl.io/pod-set` annotation is theirs to write), then adds one more gated pod shaped
    like the driver (0) or a worker (1). It starts only where a worker really left."""
    pods = sample()
    running = running_group(pods)
    for worker, edit in edits:
        edit(running[1 + worker])
    extra = copy.deepcopy(pods[extra_from])
    extra["metadata"]["name"] = "sweep-extra"
    got = pg.to_ungate([*running, extra], admitted_sets(pods), placements(pods))
    assert got == ([extra] if starts else []), case


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.integers(0, 3),  # which sample pod it is shaped like
            st.booleans(),  # started
            st.sampled_from(["keep", "drop", "bogus", "driver", "failed"]),
        ),
        min_size=1,
        max_size=8,
    )
)
def test_whatever_started_pods_say_no_pod_set_ever_runs_more_than_admitted(
    pods_spec: list[tuple[int, bool, str]],
) -> None:
    """The sample group admitted; any mix of its pods' copies, started or gated, with their
    pod-set annotations kept, dropped or forged, some failed: no pod is started that takes its
    true shape, or the group, past the admitted count."""
    base = sample()
    sets = admitted_sets(base)
    placed = placements(base)
    started_pods = {p["metadata"]["name"]: p for p in running_group(base)}
    pods: list[Obj] = []
    for i, (shape_of, started, edit) in enumerate(pods_spec):
        source = started_pods[base[shape_of]["metadata"]["name"]] if started else base[shape_of]
        pod = copy.deepcopy(source)
        pod["metadata"]["name"] = f"p-{i}"
        if edit == "drop":
            _annotate(None)(pod)
        elif edit == "bogus":
            _annotate("ps-bogus")(pod)
        elif edit == "driver":
            _driver_pod_set(pod)
        elif edit == "failed":
            pod["status"]["phase"] = "Failed"
        pods.append(pod)
    ungated = {id(p) for p in pg.to_ungate(pods, sets, placed)}
    running: dict[str, int] = {}
    for pod, (shape_of, started, _) in zip(pods, pods_spec, strict=True):
        if pg.active(pod) and (started or id(pod) in ungated):
            name = pg.pod_set_name(pg.shape(base[shape_of]))
            running[name] = running.get(name, 0) + 1
    admitted = {str(ps["name"]): int(ps["count"]) for ps in sets}
    newly = [pg.pod_set_name(pg.shape(p)) for p in pods if id(p) in ungated]
    # It never starts a pod beyond the admission (pods already running beyond it are the
    # enforcement loop's to stop).
    assert all(running[name] <= admitted[name] for name in newly), (running, newly)
    if newly:
        assert sum(running.values()) <= sum(admitted.values()), running


# --- an LWS replica placed in slices: each pod on the node the core chose for its index -----
def lws_pod(worker: int, gpus: int = 8) -> Obj:
    """Pod `worker` of replica 0 of LWS `trainer` (size 4; the leader is worker 0)."""
    return {
        "metadata": {
            "name": f"trainer-0-{worker}" if worker else "trainer-0",
            "namespace": "ns",
            "labels": {
                names.LABEL_QUEUE_NAME: "lq",
                pg.LWS_NAME: "trainer",
                pg.LWS_GROUP_INDEX: "0",
                names.LABEL_LWS_WORKER_INDEX: str(worker),
            },
            "annotations": {pg.LWS_SIZE: "4"},
        },
        "spec": {
            "schedulingGates": [{"name": pg.GATE}],
            "containers": [
                {"name": "c", "resources": {"requests": {names.GPU_RESOURCE: str(gpus)}}}
            ],
        },
        "status": {"phase": "Pending"},
    }


def pinned_host(patch: dict[str, Any]) -> str:
    [term] = patch["spec"]["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"
    ]["nodeSelectorTerms"]
    [host] = [e["values"] for e in term["matchExpressions"] if e["key"] == names.LABEL_HOSTNAME]
    return str(host[0])


def host_pins(*counts: tuple[int, str]) -> tuple[PodPin, ...]:
    return pinning.pins_of([(n, {names.LABEL_HOSTNAME: host}) for n, host in counts])


@pytest.mark.parametrize(
    ("leader_gpus", "pins"),
    [
        pytest.param(8, {4: host_pins((2, "n0"), (2, "n1"))}, id="leader and workers one pod set"),
        pytest.param(
            4,
            {1: host_pins((1, "n0")), 3: host_pins((1, "n0"), (2, "n1"))},
            id="the leader a pod set of its own: worker k is pod k - 1 of the workers",
        ),
    ],
)
def test_an_lws_replicas_pods_are_ungated_each_onto_its_own_pin(
    leader_gpus: int, pins: dict[int, tuple[PodPin, ...]]
) -> None:
    pods = [lws_pod(0, leader_gpus), *(lws_pod(w) for w in (1, 2, 3))]
    sets = admitted_sets(pods)
    placed = [PodSetPlacement(str(ps["name"]), PLACED, pins=pins[int(ps["count"])]) for ps in sets]
    patches = [pg.ungate_patch(p, pg.placement_for(p, placed), "w") for p in pods]
    assert [pinned_host(p) for p in patches] == ["n0", "n0", "n1", "n1"]
    # Once started so, each pod is still known as its pod set's (not an unknown shape).
    index = pg.PodSetIndex(sets, placed)
    for pod, patch in zip(pods, patches, strict=True):
        run = copy.deepcopy(pod)
        run["spec"].update({k: v for k, v in patch["spec"].items() if v is not None})
        run["spec"].pop("schedulingGates")
        assert index.of(run) == pg.pod_set_name(pg.shape(pod))
