"""The web view: what the cluster view and a namespace's view say (pure, from a snapshot), the
snapshot the controller takes of its core and cache, the page and its data paths behind the
visibility API's front-proxy check, and the estimates kept between refreshes."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from queuectl.controller import board, visibility, webview
from queuectl.controller.board import CohortFacts, LocalQueueFacts, NodeFacts, QueueFacts, Snapshot
from queuectl.controller.etas import EtaCache, runtime_history
from queuectl.controller.visibility import FrontProxy
from queuectl.controller.watch import kube as k
from queuectl.core.fleet import QuotaRow
from tests.unit.controller.test_visibility import AS_ALICE, NOW, PROXY_NAME, World, _world

PREFIX = "/apis/visibility.queuectl.io/v1beta1"


def _gpus(nominal: int, used: int, borrowed: int = 0, lent: int = 0) -> tuple[QuotaRow, ...]:
    return (QuotaRow("h100", "nvidia.com/gpu", nominal, None, None, used, borrowed, lent),)


def _item(ns: str, name: str, lq: str, pos: int) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": ns},
        "localQueueName": lq,
        "positionInClusterQueue": pos,
    }


def _snapshot() -> Snapshot:
    """Cohort org over research (cohort) over team-a's queue, and team-b's queue under org;
    team-a borrows 4 of team-b's idle GPUs. Two racks of H100 nodes, one node with a bad GPU."""
    return Snapshot(
        now=NOW,
        cohorts=(
            CohortFacts("org", None, _gpus(0, 4)),
            CohortFacts("research", "org", _gpus(0, 12, borrowed=4)),
        ),
        queues=(
            QueueFacts("team-a", "research", admitted=2, quota=_gpus(8, 12, borrowed=4)),
            QueueFacts(
                "team-b",
                "org",
                quota=_gpus(8, 0, lent=4),
                pending=(
                    _item("team-b", "big", "lq", 0),
                    _item("team-c", "secret", "lq", 1),
                    _item("team-b", "small", "other", 2),
                ),
            ),
            QueueFacts("solo", None),
        ),
        local_queues=(
            LocalQueueFacts("team-b", "lq", "team-b"),
            LocalQueueFacts("team-b", "other", "team-b"),
            LocalQueueFacts("team-c", "lq", "team-b"),
        ),
        nodes=(
            NodeFacts("n2", "r1", ("h100",), 8, 8, 0),
            NodeFacts("n1", "r1", ("h100",), 8, 4, 1),
            NodeFacts("n3", "r2", ("h100",), 8, 0, 0, ready=False),
            NodeFacts("cpu", "r2", (), 0, 0, 0),
        ),
    )


def test_the_cluster_view_is_the_cohort_tree_with_each_queues_quota_and_line() -> None:
    view = board.cluster_view(_snapshot())
    assert view["kind"] == "ClusterView" and view["generatedAt"] == "1970-01-01T00:10:00Z"
    org, solo = view["tree"]
    assert (org["kind"], org["name"], solo["name"]) == ("Cohort", "org", "solo")
    research, team_b = org["children"]
    assert (research["name"], team_b["name"]) == ("research", "team-b")
    (team_a,) = research["children"]
    assert team_a["quota"] == [
        {
            "flavor": "h100",
            "resource": "nvidia.com/gpu",
            "nominal": 8,
            "used": 12,
            "borrowed": 4,
            "lent": 0,
            "borrowingLimit": None,
        }
    ]
    assert team_b["quota"][0]["lent"] == 4
    assert [i["metadata"]["name"] for i in team_b["pending"]] == ["big", "secret", "small"]
    assert team_b["localQueues"] == ["team-b/lq", "team-b/other", "team-c/lq"]


def test_gpu_nodes_are_grouped_by_flavor_and_rack_with_allocation_and_health() -> None:
    groups = board.cluster_view(_snapshot())["nodeGroups"]
    assert [
        (g["flavor"], g["rack"], g["gpus"], g["allocated"], g["unhealthy"]) for g in groups
    ] == [
        ("h100", "r1", 16, 12, 1),
        ("h100", "r2", 8, 0, 0),
    ]
    assert [(n["name"], n["health"]) for g in groups for n in g["nodes"]] == [
        ("n1", "1 GPU unhealthy"),
        ("n2", "ok"),
        ("n3", "NotReady"),
    ]  # the CPU node is no GPU node


def test_a_namespace_sees_its_localqueues_and_its_own_workloads_only() -> None:
    """team-b's view: its two LocalQueues with team-b's quota; team-c's `secret` stands in the
    same line and is never named, though `small`'s position still counts it."""
    view = board.namespace_view(_snapshot(), "team-b")
    assert view["kind"] == "NamespaceView" and view["namespace"] == "team-b"
    lq, other = view["localQueues"]
    assert (lq["name"], lq["clusterQueue"], lq["quota"][0]["nominal"]) == ("lq", "team-b", 8)
    assert [i["metadata"]["name"] for i in lq["pending"]] == ["big"]
    assert [(i["metadata"]["name"], i["positionInClusterQueue"]) for i in other["pending"]] == [
        ("small", 2)
    ]
    assert "secret" not in repr(view) and "team-c" not in repr(view)
    assert "nodeGroups" not in view and "tree" not in view
    assert board.namespace_view(_snapshot(), "nobody")["localQueues"] == []


def test_a_queue_shows_the_head_of_a_long_line_and_how_many_wait() -> None:
    items = tuple(_item("t", f"w{i}", "lq", i) for i in range(board.PENDING_SHOWN + 5))
    snap = Snapshot(NOW, queues=(QueueFacts("q", None, pending=items),))
    (q,) = board.cluster_view(snap)["tree"]
    assert q["pendingCount"] == board.PENDING_SHOWN + 5
    assert len(q["pending"]) == board.PENDING_SHOWN


# --- the controller's snapshot and the routes ---------------------------------------------------
def _node(name: str, rack: str, gpus: int, **labels: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "labels": {"topology.queuectl.io/rack": rack, **labels}},
        "spec": {},
        "status": {
            "allocatable": {"nvidia.com/gpu": str(gpus)},
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }


def _pod(name: str, node: str, gpus: int) -> dict[str, Any]:
    resources = {"requests": {"nvidia.com/gpu": str(gpus)}}
    return {
        "metadata": {"name": name, "namespace": "team-a"},
        "spec": {"nodeName": node, "containers": [{"name": "c", "resources": resources}]},
    }


def _world_with_nodes() -> World:
    from queuectl import convert

    world = _world()
    sched = world.core._sched
    for raw in (_node("a", "r1", 8, gpu="a100"), _node("b", "r2", 8)):
        world.cache.add(k.NODES, raw)
        sched.upsert_node(convert.node(raw))
    world.cache.add(k.PODS, _pod("running-0", "a", 4))
    return world


async def test_the_snapshot_reads_the_queues_line_estimates_and_nodes_from_the_core() -> None:
    world = _world_with_nodes()
    etas = await world.estimates()
    snap = webview.take_snapshot(world.core._sched, world.cache, etas, NOW, leading=True)
    (q,) = snap.queues
    assert (q.name, q.admitted, q.quota[0].used) == ("gpus", 1, 4)
    assert [i["metadata"]["name"] for i in q.pending] == ["urgent", "mid", "early", "other"]
    assert q.pending[0]["estimatedStartTime"] == "1970-01-01T01:00:00Z"
    nodes = {n.name: n for n in snap.nodes}
    assert (nodes["a"].rack, nodes["a"].gpus, nodes["a"].allocated) == ("r1", 8, 4)
    assert nodes["b"].allocated == 0 and snap.notes == ()
    standby = webview.take_snapshot(world.core._sched, world.cache, {}, NOW, leading=False)
    assert standby.notes == (webview.STANDBY_NOTE, "no start estimates yet")


@pytest.fixture
async def app_url() -> AsyncIterator[str]:
    """The visibility app with the web view's routes; the front proxy's certificate is taken
    as verified (the TLS check itself is test_visibility.py's)."""
    world = _world_with_nodes()
    proxy = FrontProxy(b"", allowed_names=(PROXY_NAME,))
    cert = {"subject": ((("commonName", PROXY_NAME),),)}
    app = visibility.make_app(world, proxy, lambda _: cert, extra=webview.routes(world))
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    yield f"http://127.0.0.1:{runner.addresses[0][1]}"
    await runner.cleanup()


async def _fetch(url: str, headers: Mapping[str, str] = AS_ALICE) -> tuple[int, str, str]:
    async with aiohttp.ClientSession() as session, session.get(url, headers=headers) as r:
        return r.status, r.content_type, await r.text()


@pytest.mark.parametrize("path", ["/webview", "/namespaces/team-a/webview"])
async def test_the_page_is_one_self_contained_document(app_url: str, path: str) -> None:
    status, content_type, text = await _fetch(app_url + PREFIX + path)
    assert (status, content_type) == (200, "text/html")
    assert "<script>" in text and "<style>" in text
    for external in ("src=", "href=", "http://", "https://", "@import"):
        assert external not in text  # it must open with no network


async def test_the_data_paths_answer_each_audience(app_url: str) -> None:
    import json

    status, _, text = await _fetch(app_url + PREFIX + "/clusterqueues")
    cluster = json.loads(text)
    assert status == 200 and cluster["kind"] == "ClusterView"
    assert [g["rack"] for g in cluster["nodeGroups"]] == ["r1", "r2"]
    status, _, text = await _fetch(app_url + PREFIX + "/namespaces/team-b/localqueues")
    mine = json.loads(text)
    assert status == 200 and [lq["name"] for lq in mine["localQueues"]] == ["lq"]
    assert [i["metadata"]["name"] for i in mine["localQueues"][0]["pending"]] == ["mid"]
    status, _, text = await _fetch(app_url + PREFIX + "/clusterqueues", headers={})
    assert status == 401 and "named no user" in text  # the same front-proxy check as the lists


# --- the estimates ------------------------------------------------------------------------------
async def test_estimates_are_computed_once_per_refresh_however_many_ask() -> None:
    """Twenty requests at once share one replay; asked again within the refresh interval, the
    same answer; once stale, the stale answer at once and one more replay behind it."""
    world = _world()
    clock = [NOW]
    workloads = world.cache.store(k.WORKLOADS).values
    cache = EtaCache(world.core, workloads, lambda: clock[0], refresh_s=10.0)
    answers = await asyncio.gather(*(cache.get() for _ in range(20)))
    assert cache.refreshes == 1 and all(a is answers[0] for a in answers)
    assert answers[0]["team-a/urgent"].start == 3600.0
    clock[0] += 9.0
    assert await cache.get() is answers[0] and cache.refreshing is None
    clock[0] += 2.0
    stale = await asyncio.gather(*(cache.get() for _ in range(5)))
    assert all(a is answers[0] for a in stale)
    refresh = cache.refreshing
    assert refresh is not None
    await refresh
    assert cache.refreshes == 2 and cache.computed_at == NOW + 11.0
    assert (await cache.get())["team-a/urgent"].start == 3600.0


async def test_a_failing_estimate_leaves_the_lists_without_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """An estimate is advice: a replay that raises is logged and the lists go on without."""

    def broken(*_: Any, **__: Any) -> Any:
        def replay() -> Any:
            raise RuntimeError("boom")

        return replay

    monkeypatch.setattr("queuectl.controller.etas.prepare_estimate", broken)
    world = _world()
    cache = EtaCache(world.core, world.cache.store(k.WORKLOADS).values, lambda: NOW)
    assert await cache.get() == {}
    assert cache.refreshes == 1


def _finished(name: str, cq: str, reserved: str, finished: str, priority: int = 0) -> Any:
    return {
        "metadata": {"name": name, "namespace": "t"},
        "spec": {"priority": priority},
        "status": {
            "admission": {"clusterQueue": cq},
            "conditions": [
                {"type": "QuotaReserved", "status": "True", "lastTransitionTime": reserved},
                {"type": "Finished", "status": "True", "lastTransitionTime": finished},
            ],
        },
    }


def test_runtimes_are_learned_from_the_finished_workloads_in_the_cache() -> None:
    history = runtime_history(
        [
            _finished(f"w{i}", "gpus", "2026-01-01T00:00:00Z", f"2026-01-01T0{i}:00:00Z")
            for i in (1, 2, 3)
        ]
        + [{"metadata": {"name": "pending", "namespace": "t"}, "spec": {}, "status": {}}]
    )
    assert len(history) == 3
    assert history.remaining("gpus", 0) == 7200.0
