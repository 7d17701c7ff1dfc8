"""Dropped connections against the real API server: the controller runs in this process over
a Kube client that loses chosen requests, either before they leave ("before": the server never
sees them) or after the server answered ("after": the answer is lost), exactly what a client
sees when its connection drops mid-request.

- An admission write lost before the server leaves no quota charged: the Workload is admitted
  on a later cycle (without the fix it waited forever behind "0 available").
- An admission whose answer is lost is kept, and the quota is not given a second time.
- A watch whose connection is cut mid-stream resumes from its last event: no replay, no relist.
- Two electors with wall clocks two hours apart, one of them failing every other renewal
  (a request lost before the server, or an answer lost after it), never both lead; a
  released Lease passes to the other.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

import aiohttp

from e2e.harness import apply, one_queue
from queuectl.api import names
from queuectl.api.resource import Resource
from queuectl.api.views import WorkloadView
from queuectl.cli.controller import install_crds
from queuectl.controller.leader import LeaderElector
from queuectl.controller.manager import Controller
from queuectl.controller.watch import kube as k
from queuectl.controller.watch.kube import Kube
from queuectl.controller.watch.watcher import Store, Watcher
from queuectl.testenv.cluster import Cluster
from queuectl.testenv.pytest_plugin import StandardFleet

T = TypeVar("T")
Match = Callable[[str, str, Any], bool]


class DroppingKube(Kube):
    """A Kube whose chosen requests end in ServerDisconnectedError, before or after the
    server handled them. Each matching request takes the first matching plan entry: "before",
    "after" or "pass" (served normally)."""

    def __init__(self, api_client: Any) -> None:
        super().__init__(api_client)
        self.drops: list[tuple[Match, str]] = []
        self.dropped: list[tuple[str, str]] = []

    @classmethod
    async def to(cls, kubeconfig: str) -> DroppingKube:
        return cls((await Kube.connect(kubeconfig)).api_client)

    async def raw(self, method: str, path: str, **kw: Any) -> aiohttp.ClientResponse:
        drops = self.drops
        for i, (match, how) in enumerate(drops):
            if match(method, path, kw.get("body")):
                del drops[i]
                if how == "pass":
                    break
                if how == "after":
                    response = await super().raw(method, path, **kw)
                    async with response:
                        await response.read()
                self.dropped.append((how, path))
                raise aiohttp.ServerDisconnectedError()
        return await super().raw(method, path, **kw)


def admission_write(method: str, path: str, body: Any) -> bool:
    return (
        method == "PATCH"
        and path.endswith("/status")
        and "/workloads/" in path
        and "admission" in ((body or {}).get("status") or {})
    )


def workload(name: str, namespace: str, gpus: int = 8) -> dict[str, Any]:
    return {
        "apiVersion": names.API_VERSION,
        "kind": "Workload",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "queueName": "lq",
            "podSets": [
                {
                    "name": "main",
                    "count": 1,
                    "template": {
                        "spec": {
                            "containers": [
                                {
                                    "name": "c",
                                    "image": "x",
                                    "resources": {"requests": {names.GPU_RESOURCE: str(gpus)}},
                                }
                            ]
                        }
                    },
                }
            ],
        },
    }


async def until(what: str, probe: Callable[[], Awaitable[T | None]], timeout: float = 90) -> T:
    """Poll without blocking the controller that runs on this loop."""
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        got = await probe()
        if got:
            return got
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.2)


@contextlib.asynccontextmanager
async def controller_in_process(kubeconfig: str) -> AsyncIterator[tuple[Controller, DroppingKube]]:
    kube = await DroppingKube.to(kubeconfig)
    await install_crds(kube)
    ctrl = Controller(kube)
    task = asyncio.create_task(ctrl.run())
    try:
        await until("caches synced", lambda: _started(ctrl, task))
        yield ctrl, kube
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        await kube.close()


async def _started(ctrl: Controller, task: asyncio.Task[None]) -> bool:
    if task.done():
        task.result()
    return ctrl.started.is_set()


async def fetch(kube: Kube, name: str, namespace: str) -> dict[str, Any]:
    return await kube.get(k.WORKLOADS, name, namespace)


async def test_an_admission_write_lost_before_the_server_charges_no_quota_and_is_retried(
    control_plane: Cluster, namespace: str, gpu_nodes: StandardFleet
) -> None:
    async with controller_in_process(control_plane.kubeconfig) as (_, kube):
        await asyncio.to_thread(one_queue, control_plane, namespace, 8)
        kube.drops.append((admission_write, "before"))
        await asyncio.to_thread(apply, control_plane, workload("a", namespace))

        async def admitted() -> dict[str, Any] | None:
            wl = await fetch(kube, "a", namespace)
            return wl if WorkloadView(wl).holds_quota else None

        wl = await until("a admitted after its lost admission write", admitted)
        assert kube.dropped == [("before", k.WORKLOADS.path(namespace, "a", "status"))]
        assert wl["status"]["admission"]["clusterQueue"] == f"cq-{namespace}"


async def test_an_admission_whose_answer_is_lost_is_kept_and_its_quota_not_given_twice(
    control_plane: Cluster, namespace: str, gpu_nodes: StandardFleet
) -> None:
    async with controller_in_process(control_plane.kubeconfig) as (ctrl, kube):
        await asyncio.to_thread(one_queue, control_plane, namespace, 8)
        kube.drops.append((admission_write, "after"))
        await asyncio.to_thread(apply, control_plane, workload("a", namespace))

        async def admitted() -> dict[str, Any] | None:
            wl = await fetch(kube, "a", namespace)
            return wl if WorkloadView(wl).holds_quota else None

        await until("a admitted", admitted)
        assert kube.dropped == [("after", k.WORKLOADS.path(namespace, "a", "status"))]
        await asyncio.to_thread(apply, control_plane, workload("b", namespace))

        async def waiting_for_quota() -> bool:
            cond = WorkloadView(await fetch(kube, "b", namespace)).condition("QuotaReserved") or {}
            return cond.get("reason") == names.REASON_WAITING_FOR_QUOTA

        await until("b waiting for quota", waiting_for_quota)
        for _ in range(10):  # a few more cycles: b stays out, a stays in
            await asyncio.sleep(0.3)
            ctrl._wake.set()
        assert WorkloadView(await fetch(kube, "a", namespace)).holds_quota
        assert not WorkloadView(await fetch(kube, "b", namespace)).holds_quota


async def test_two_electors_two_hours_apart_one_failing_every_other_renewal_never_both_lead(
    control_plane: Cluster, namespace: str
) -> None:
    flaky = await DroppingKube.to(control_plane.kubeconfig)
    steady = await DroppingKube.to(control_plane.kubeconfig)
    every_lease_call: Match = lambda m, path, b: "/leases/" in path or path.endswith("/leases")  # noqa: E731
    # a step is GET + PUT: every other step of a fails, by a GET that never reaches the
    # server or by a renewal that lands but whose answer is lost
    block = ("pass", "pass", "before", "pass", "pass", "pass", "after")
    flaky.drops = [(every_lease_call, how) for _ in range(10) for how in block]
    a = LeaderElector(
        flaky,
        name="faults",
        namespace=namespace,
        identity="a",
        wall=lambda: datetime.now(UTC) - timedelta(hours=1),
    )
    b = LeaderElector(
        steady,
        name="faults",
        namespace=namespace,
        identity="b",
        wall=lambda: datetime.now(UTC) + timedelta(hours=1),
    )
    tasks = [asyncio.create_task(a.run())]
    try:
        await until("a leads", lambda: _is_set(a))
        tasks.append(asyncio.create_task(b.run()))
        loop = asyncio.get_running_loop()
        end = loop.time() + 20  # longer than the 15 s lease: b had every chance to take it
        while loop.time() < end:
            assert not (a.leading.is_set() and b.leading.is_set()), "two leaders"
            assert not b.leading.is_set(), "b took a lease that a kept renewing"
            for t in tasks:
                if t.done():
                    t.result()
            await asyncio.sleep(0.1)
        assert a.leading.is_set()
        hows = [how for how, _ in flaky.dropped]
        assert hows.count("before") >= 2 and hows.count("after") >= 2, hows
        tasks[0].cancel()
        flaky.drops.clear()
        await a.release()
        await until("b leads once a released the lease", lambda: _is_set(b), timeout=30)
    finally:
        for t in tasks:
            t.cancel()
        for kube in (flaky, steady):
            await kube.close()


async def _is_set(elector: LeaderElector) -> bool:
    return elector.leading.is_set()


CONFIG_MAPS = Resource("", "v1", "configmaps", True, "ConfigMap")


class CuttableKube(DroppingKube):
    """Keeps every open watch response, so a test can cut its connection mid-stream."""

    def __init__(self, api_client: Any) -> None:
        super().__init__(api_client)
        self.watches: list[aiohttp.ClientResponse] = []

    async def raw(self, method: str, path: str, **kw: Any) -> aiohttp.ClientResponse:
        response = await super().raw(method, path, **kw)
        if (kw.get("query") or {}).get("watch") == "true":
            self.watches.append(response)
        return response


async def test_a_watch_whose_connection_is_cut_resumes_where_it_was_without_replaying(
    control_plane: Cluster, namespace: str
) -> None:
    kube = CuttableKube((await Kube.connect(control_plane.kubeconfig)).api_client)
    store = Store(CONFIG_MAPS)
    seen: list[tuple[str, str]] = []
    store.listeners.append(lambda kind, obj, _: seen.append((kind, obj["metadata"]["name"])))
    watcher = Watcher(kube, store, label_selector=f"fault-test={namespace}")
    task = asyncio.create_task(watcher.run())

    async def kubectl(*args: str) -> None:
        await asyncio.to_thread(control_plane.kubectl, *args)

    async def has(name: str) -> bool:
        return store.get(namespace, name) is not None

    try:
        await until("synced", lambda: _is_event_set(watcher.synced))
        await kubectl("create", "configmap", "x", "-n", namespace)
        await kubectl("label", "configmap", "x", "-n", namespace, f"fault-test={namespace}")
        await until("x seen", lambda: has("x"))
        await kubectl("delete", "configmap", "x", "-n", namespace)
        await until("x gone", lambda: _not(has("x")))
        conn = kube.watches[-1].connection
        assert conn is not None and conn.transport is not None
        conn.transport.abort()  # the API server's side of the stream is gone mid-response
        await until("a new watch", lambda: _true(len(kube.watches) >= 2))
        await kubectl("create", "configmap", "y", "-n", namespace)
        await kubectl("label", "configmap", "y", "-n", namespace, f"fault-test={namespace}")
        await until("y seen", lambda: has("y"))
        assert seen == [("ADDED", "x"), ("DELETED", "x"), ("ADDED", "y")]
        assert watcher.relists == 1
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        await kube.close()


async def _is_event_set(event: asyncio.Event) -> bool:
    return event.is_set()


async def _not(awaitable: Awaitable[bool]) -> bool:
    return not await awaitable


async def _true(value: bool) -> bool:
    return value
