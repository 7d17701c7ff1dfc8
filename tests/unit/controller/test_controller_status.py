"""Workload status edits: conditional on the resourceVersion, conditions set."""

from __future__ import annotations

from typing import Any

from queuectl.api import names
from queuectl.api.views import WorkloadView
from queuectl.controller.admission import placement, status
from queuectl.core import types as core
from queuectl.core.results import Preemption

T0 = 1_735_689_600.0


def wl(**st: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": "w", "namespace": "ns", "resourceVersion": "7", "generation": 1},
        "status": st,
    }


def cond(patch: dict[str, Any], type_: str) -> Any:
    return WorkloadView({"status": patch["status"]}).condition(type_)


ADMISSION = core.Admission(
    "cq", (core.PodSetAssignment("main", 2, {"nvidia.com/gpu": "h100"}, {"nvidia.com/gpu": 16}),)
)


def test_every_write_is_conditional_on_the_version_decided_on() -> None:
    for patch in (
        status.admit(wl(), ADMISSION, T0),
        status.finished(wl(), "Succeeded", "", T0),
        status.requeued(wl(), T0, 0),
    ):
        assert patch["metadata"] == {"resourceVersion": "7"}


def test_admission_sets_quota_reserved_and_admitted() -> None:
    patch = status.admit(wl(), ADMISSION, T0)
    assert patch["status"]["admission"]["clusterQueue"] == "cq"
    for type_ in (names.COND_QUOTA_RESERVED, names.COND_ADMITTED):
        c = cond(patch, type_)
        assert c is not None and c["status"] == "True"
        assert c["lastTransitionTime"] == "2025-01-01T00:00:00Z"
    assert "h100" in cond(patch, names.COND_QUOTA_RESERVED)["message"]


def test_an_uneven_balanced_placement_says_why_in_the_quota_reserved_message() -> None:
    note = "balanced placement is uneven: pods 4/1 over 2 domains, as r2 holds only 1"
    topo = core.TopologyAssignment(("rack",), "rack", (), (), note=note)
    uneven = core.Admission(
        "cq",
        (
            core.PodSetAssignment(
                "main", 5, {"nvidia.com/gpu": "h100"}, {"nvidia.com/gpu": 40}, topo
            ),
        ),
    )
    message = cond(status.admit(wl(), uneven, T0), names.COND_QUOTA_RESERVED)["message"]
    assert f"main: {note}" in message
    even = cond(status.admit(wl(), ADMISSION, T0), names.COND_QUOTA_RESERVED)["message"]
    assert "balanced" not in even


def test_pending_is_written_only_when_reason_or_message_changed() -> None:
    first = status.pending(wl(), "WaitingForQuota", "needs 8 nvidia.com/gpu", T0)
    assert first is not None
    again = wl(**first["status"])
    assert status.pending(again, "WaitingForQuota", "needs 8 nvidia.com/gpu", T0 + 5) is None
    changed = status.pending(again, "WaitingForQuota", "needs 4 nvidia.com/gpu", T0 + 5)
    assert changed is not None
    c = cond(changed, names.COND_QUOTA_RESERVED)
    assert c is not None and c["lastTransitionTime"] == "2025-01-01T00:00:00Z"  # no flip


def test_preemption_notice_then_requeue_clears_admission_and_keeps_history() -> None:
    admitted = wl(**status.admit(wl(), ADMISSION, T0)["status"])
    notice = status.preempted(
        admitted, Preemption("ns/w", "ns/p", "InCohortReclamation", "reclaimed", T0 + 300), T0
    )
    assert notice["status"]["preemption"] == {
        "preemptor": "ns/p",
        "deadline": "2025-01-01T00:05:00Z",
    }
    evicting = wl(**{**admitted["status"], **notice["status"]})
    evicting = wl(
        **{
            **evicting["status"],
            **status.evicted(evicting, "Preempted", "grace over", T0 + 300)["status"],
        }
    )
    back = status.requeued(evicting, T0 + 310, 310)
    assert back["status"]["admission"] is None
    assert back["status"]["accumulatedPastExecutionTimeSeconds"] == 310
    assert cond(back, names.COND_QUOTA_RESERVED)["status"] == "False"
    assert cond(back, names.COND_REQUEUED)["status"] == "True"
    assert cond(back, names.COND_EVICTED)["status"] == "False"


def test_admitted_seconds_adds_the_running_admission_to_the_past() -> None:
    admitted = wl(
        **status.admit(wl(), ADMISSION, T0)["status"], accumulatedPastExecutionTimeSeconds=100
    )
    assert status.admitted_seconds(admitted, T0 + 50) == 150


def test_placement_of_one_rack_pins_every_level_down_to_the_rack() -> None:
    topo = core.TopologyAssignment(
        ("block", "rack", "host"),
        "rack",
        ("b1", "r2"),
        (core.DomainAssignment(("b1", "r2", "n1"), ("n1",), 2),),
    )
    assert placement.domain_constraint(topo) == {"block": ("b1",), "rack": ("r2",)}
    spread = core.TopologyAssignment(
        ("block", "host"),
        None,
        (),
        (
            core.DomainAssignment(("b1", "n2"), ("n2",), 1),
            core.DomainAssignment(("b2", "n1"), ("n1",), 1),
        ),
    )
    assert placement.domain_constraint(spread) == {"host": ("n1", "n2")}


def test_pod_sets_sharing_a_domain_are_each_pinned_to_the_nodes_counted_for_them() -> None:
    """A master (1 pod, one host) and 3 workers in one block: naming only the block would let
    a worker take the master's host, and the master pinned there would never run."""
    levels = ("block", "rack", "host")
    master = core.TopologyAssignment(
        levels, "host", ("b0", "r0", "n0"), (core.DomainAssignment(("b0", "r0", "n0"), ("n0",), 1),)
    )
    workers = core.TopologyAssignment(
        levels,
        "block",
        ("b0",),
        tuple(
            core.DomainAssignment(("b0", rack, node), (node,), 1)
            for rack, node in (("r0", "n1"), ("r1", "n2"), ("r1", "n3"))
        ),
    )
    gpu = {"nvidia.com/gpu": "h100"}
    adm = core.Admission(
        "cq",
        (
            core.PodSetAssignment("master", 1, gpu, {}, master),
            core.PodSetAssignment("worker", 3, gpu, {}, workers),
        ),
    )
    by_name = {p.name: p.domain for p in placement.placements(adm, {})}
    assert by_name["master"] == {"block": ("b0",), "rack": ("r0",), "host": ("n0",)}
    assert by_name["worker"] == {"block": ("b0",), "host": ("n1", "n2", "n3")}
    alone = core.Admission("cq", (core.PodSetAssignment("worker", 3, gpu, {}, workers),))
    assert placement.placements(alone, {})[0].domain == {"block": ("b0",)}  # its own domain


def test_placements_merge_the_chosen_flavors() -> None:
    adm = core.Admission(
        "cq", (core.PodSetAssignment("main", 1, {"nvidia.com/gpu": "h100", "cpu": "default"}, {}),)
    )
    flavors: dict[str, Any] = {
        "h100": {"spec": {"nodeLabels": {"gpu": "h100"}, "tolerations": [{"key": "gpu"}]}},
        "default": {"spec": {}},
    }
    (p,) = placement.placements(adm, flavors)
    assert (p.node_labels, p.tolerations, p.domain) == ({"gpu": "h100"}, ({"key": "gpu"},), {})
