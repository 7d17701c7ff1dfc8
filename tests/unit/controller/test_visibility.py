"""The visibility API's handlers: who may ask (only the aggregator, over verified TLS), and what
they are told (the ClusterQueue's line in the core's order, each LocalQueue's part of it).

The server runs with real TLS here: the client certificates come from a front-proxy CA, from
another CA, or are absent, exactly as the kube-apiserver (or an intruder) would connect.
"""

from __future__ import annotations

import ssl
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from queuectl.api.resource import Resource
from queuectl.controller import visibility
from queuectl.controller.etas import EtaCache
from queuectl.controller.feed.corethread import CoreThread
from queuectl.controller.visibility import FrontProxy
from queuectl.controller.watch import kube as k
from queuectl.controller.watch.kube import Obj
from queuectl.core import ETA_ASSUMES, Eta, Flavor, Scheduler
from queuectl.testenv.pki import CertificateAuthority
from tests.unit.core.core_helpers import gpu_queue, job, quota

PROXY_NAME = "front-proxy-client"
HOUR = 3600.0


class Objects:
    def __init__(self) -> None:
        self.objects: dict[tuple[str, str, str], Obj] = {}

    def add(self, res: Resource, obj: Obj) -> None:
        meta = obj["metadata"]
        self.objects[(res.plural, meta.get("namespace", ""), meta["name"])] = obj

    def get(self, res: Resource, name: str, namespace: str = "") -> Obj | None:
        return self.objects.get((res.plural, namespace, name))

    def store(self, res: Resource) -> Values:
        return Values([o for (plural, _, _), o in self.objects.items() if plural == res.plural])


@dataclass
class Values:
    objects: list[Obj]

    def values(self) -> list[Obj]:
        return list(self.objects)


NOW = 600.0


@dataclass
class World:
    cache: Objects
    core: CoreThread
    leads: bool = True
    etas: EtaCache | None = None

    def leading(self) -> bool:
        return self.leads

    def clock(self) -> float:
        return NOW

    async def estimates(self) -> Mapping[str, Eta]:
        return {} if self.etas is None else await self.etas.get()


def _workload(key: str, queue: str) -> Obj:
    ns, name = key.split("/")
    return {"metadata": {"name": name, "namespace": ns}, "spec": {"queueName": queue}}


def _world() -> World:
    """ClusterQueue `gpus` (4 GPUs) is full with team-a/running, which may run an hour; behind
    it wait, from two namespaces and three LocalQueues: a late high-priority job, a mid one and
    two early ones."""
    sched = Scheduler()
    sched.upsert_flavor(Flavor("a100"))
    sched.upsert_cluster_queue(gpu_queue("gpus", quota("a100", 4), cohort=None))
    running = job("team-a/running", "gpus", 4, created=0.0)
    sched.upsert_workload(replace(running, max_execution_seconds=HOUR))
    sched.run_cycle(1.0)
    cache = Objects()
    cache.add(k.CLUSTER_QUEUES, {"metadata": {"name": "gpus"}, "spec": {}})
    for ns, lq in (("team-a", "lq"), ("team-a", "lq2"), ("team-b", "lq")):
        cache.add(
            k.LOCAL_QUEUES,
            {"metadata": {"name": lq, "namespace": ns}, "spec": {"clusterQueue": "gpus"}},
        )
    waiting = [
        ("team-a/early", "lq", 0, 2.0),
        ("team-b/mid", "lq", 5, 3.0),
        ("team-a/other", "lq2", 0, 4.0),
        ("team-a/urgent", "lq", 10, 5.0),
    ]
    for key, lq, priority, created in waiting:
        sched.upsert_workload(job(key, "gpus", 2, priority=priority, created=created))
        cache.add(k.WORKLOADS, _workload(key, lq))
    sched.run_cycle(6.0)
    core = CoreThread(sched)
    workloads = cache.store(k.WORKLOADS).values
    return World(cache, core, etas=EtaCache(core, workloads, lambda: NOW))


@dataclass
class Pki:
    proxy_ca: CertificateAuthority
    tmp: Path

    def client(self, ca: CertificateAuthority | None, cn: str = PROXY_NAME) -> ssl.SSLContext:
        ctx = ssl.create_default_context()
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
        if ca is not None:
            ca.issue_client(cn).write(self.tmp, cn)
            ctx.load_cert_chain(self.tmp / f"{cn}.crt", self.tmp / f"{cn}.key")
        return ctx


@pytest.fixture
async def served(tmp_path: Path) -> AsyncIterator[tuple[str, Pki]]:
    """The app behind real TLS that asks for (and verifies) client certificates."""
    serving_ca = CertificateAuthority.create("serving-ca")
    serving_ca.issue_server("visibility").write(tmp_path, "tls")
    proxy_ca = CertificateAuthority.create("front-proxy-ca")
    tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    tls.load_cert_chain(tmp_path / "tls.crt", tmp_path / "tls.key")
    tls.load_verify_locations(cadata=proxy_ca.cert_pem.decode())
    tls.verify_mode = ssl.CERT_OPTIONAL
    proxy = FrontProxy(proxy_ca.cert_pem, allowed_names=(PROXY_NAME,))
    runner = web.AppRunner(visibility.make_app(_world(), proxy))
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=tls)
    await site.start()
    port = runner.addresses[0][1]
    yield f"https://127.0.0.1:{port}", Pki(proxy_ca, tmp_path)
    await runner.cleanup()


AS_ALICE = {"X-Remote-User": "alice", "X-Remote-Group": "team-a"}
LQ_PATH = "/apis/visibility.queuectl.io/v1beta1/namespaces/{ns}/localqueues/{lq}/pendingworkloads"
CQ_PATH = "/apis/visibility.queuectl.io/v1beta1/clusterqueues/{cq}/pendingworkloads"


async def _get(
    base: str, path: str, tls: ssl.SSLContext, headers: dict[str, str] = AS_ALICE
) -> tuple[int, Any]:
    async with (
        aiohttp.ClientSession() as session,
        session.get(base + path, ssl=tls, headers=headers) as response,
    ):
        return response.status, await response.json()


def _names(body: Any) -> list[tuple[str, int, int, int]]:
    return [
        (
            i["metadata"]["name"],
            i["priority"],
            i["positionInClusterQueue"],
            i["positionInLocalQueue"],
        )
        for i in body["items"]
    ]


async def test_the_clusterqueue_line_is_the_cores_order(served: tuple[str, Pki]) -> None:
    """Priority first, then age: urgent, mid, then the two early ones, whatever their queue."""
    base, pki = served
    status, body = await _get(base, CQ_PATH.format(cq="gpus"), pki.client(pki.proxy_ca))
    assert status == 200
    assert body["kind"] == "PendingWorkloadsSummary"
    assert body["apiVersion"] == "visibility.queuectl.io/v1beta1"
    assert _names(body) == [
        ("urgent", 10, 0, 0),
        ("mid", 5, 1, 0),
        ("early", 0, 2, 1),
        ("other", 0, 3, 0),
    ]
    first = body["items"][0]
    assert first["metadata"]["namespace"] == "team-a"
    assert first["localQueueName"] == "lq"
    assert first["reason"] and first["message"]  # the scheduler's own words


async def test_each_pending_workload_says_when_it_should_start_and_what_that_assumes(
    served: tuple[str, Pki],
) -> None:
    """`running` ends at its hour's limit; then urgent and mid (2 GPUs each) start. The
    early ones wait behind two jobs with no limit and no history of such jobs finishing:
    unknown, and the message says why."""
    base, pki = served
    status, body = await _get(base, CQ_PATH.format(cq="gpus"), pki.client(pki.proxy_ca))
    assert status == 200
    got = {i["metadata"]["name"]: i for i in body["items"]}
    for name in ("urgent", "mid"):
        assert got[name]["estimatedStartTime"] == "1970-01-01T01:00:00Z"
        assert got[name]["estimatedStartMessage"] == ETA_ASSUMES
    for name in ("early", "other"):
        assert got[name]["estimatedStartTime"] is None
        assert got[name]["estimatedStartMessage"].startswith("unknown: no runtime history")


async def test_a_localqueue_sees_only_its_part_with_both_positions(
    served: tuple[str, Pki],
) -> None:
    base, pki = served
    tls = pki.client(pki.proxy_ca)
    status, body = await _get(base, LQ_PATH.format(ns="team-a", lq="lq"), tls)
    assert status == 200
    assert _names(body) == [("urgent", 10, 0, 0), ("early", 0, 2, 1)]
    status, body = await _get(base, LQ_PATH.format(ns="team-b", lq="lq"), tls)
    assert _names(body) == [("mid", 5, 1, 0)]


async def test_limit_and_offset_page_the_line(served: tuple[str, Pki]) -> None:
    base, pki = served
    path = CQ_PATH.format(cq="gpus") + "?limit=2&offset=1"
    status, body = await _get(base, path, pki.client(pki.proxy_ca))
    assert status == 200
    assert [n for n, *_ in _names(body)] == ["mid", "early"]


@pytest.mark.parametrize(
    ("path", "code", "says"),
    [
        pytest.param(
            LQ_PATH.format(ns="team-c", lq="lq"),
            404,
            "not found in namespace team-c",
            id="unknown LocalQueue",
        ),
        pytest.param(
            CQ_PATH.format(cq="nope"),
            404,
            'clusterqueues "nope" not found',
            id="unknown ClusterQueue",
        ),
        pytest.param(
            "/apis/visibility.queuectl.io/v1beta1/clusterqueues/gpus/status",
            404,
            "this API serves",
            id="unknown subresource",
        ),
        pytest.param("/api/v1/pods", 404, "this API serves", id="another API's path"),
        pytest.param(CQ_PATH.format(cq="gpus") + "?limit=0", 400, "limit='0'", id="limit 0"),
        pytest.param(
            CQ_PATH.format(cq="gpus") + "?offset=x", 400, "offset='x'", id="offset not a number"
        ),
    ],
)
async def test_bad_paths_are_answered_with_a_reason(
    served: tuple[str, Pki], path: str, code: int, says: str
) -> None:
    base, pki = served
    status, body = await _get(base, path, pki.client(pki.proxy_ca))
    assert status == code
    assert body["kind"] == "Status" and body["code"] == code
    assert says in body["message"]


@pytest.mark.parametrize(
    ("who", "headers", "says"),
    [
        pytest.param("none", AS_ALICE, "no front-proxy client certificate", id="no certificate"),
        pytest.param(
            "other-ca",
            AS_ALICE,
            "no front-proxy client certificate",
            id="a certificate from another CA",
        ),
        pytest.param(
            "wrong-name",
            AS_ALICE,
            "is not a front proxy",
            id="the front-proxy CA's certificate for another name",
        ),
        pytest.param("proxy", {}, "named no user", id="the front proxy names no user"),
    ],
)
async def test_only_the_aggregator_is_trusted(
    served: tuple[str, Pki], who: str, headers: dict[str, str], says: str
) -> None:
    """Someone who reaches the port directly, claiming to be alice in a header, is refused."""
    base, pki = served
    ca = {"none": None, "other-ca": CertificateAuthority.create("intruder")}.get(who, pki.proxy_ca)
    cn = "someone" if who == "wrong-name" else PROXY_NAME
    try:
        status, body = await _get(base, CQ_PATH.format(cq="gpus"), pki.client(ca, cn), headers)
    except aiohttp.ClientError:
        assert who == "other-ca"  # the handshake itself fails: the chain does not verify
        return
    assert status == 401
    assert says in body["message"]
    assert "items" not in body


def test_a_standby_replica_tells_the_leaders_reason_from_the_workload() -> None:
    """Only the leader runs cycles; a standby answers the same line with the reason the leader
    wrote on each Workload's QuotaReserved condition."""
    world = _world()
    wl = world.cache.get(k.WORKLOADS, "urgent", "team-a")
    assert wl is not None
    wl["status"] = {
        "conditions": [
            {
                "type": "QuotaReserved",
                "status": "False",
                "reason": "Pending",
                "message": "waits for 2 GPUs",
            }
        ]
    }
    sched = world.core._sched
    items = visibility.pending_items(sched, world.cache, "gpus", ("team-a", "lq"), leading=False)
    assert [(i["metadata"]["name"], i["reason"], i["message"]) for i in items] == [
        ("urgent", "Pending", "waits for 2 GPUs"),
        ("early", None, None),
    ]


def test_front_proxy_settings_are_read_from_the_apiservers_configmap() -> None:
    data = {
        "requestheader-client-ca-file": "-----BEGIN CERTIFICATE-----\n...",
        "requestheader-allowed-names": '["front-proxy-client"]',
        "requestheader-username-headers": '["X-Remote-User"]',
        "requestheader-group-headers": '["X-Remote-Group"]',
    }
    proxy = FrontProxy.from_configmap(data)
    assert proxy is not None
    assert proxy.allowed_names == ("front-proxy-client",)
    assert proxy.username_headers == ("X-Remote-User",)
    assert FrontProxy.from_configmap({"client-ca-file": "x"}) is None
