"""The web view, served through the visibility API so that Kubernetes RBAC decides who sees what.

The kube-apiserver authorizes every path under `/apis/visibility.queuectl.io/v1beta1` as a
resource request before it proxies it here (visibility.py), so each audience gets its own path:

| path | RBAC | answer |
|---|---|---|
| `webview` | `list webview` | the page (package data, no external assets) |
| `namespaces/NS/webview` | `list webview` in NS | the same page |
| `clusterqueues` | `list clusterqueues` | `board.cluster_view` |
| `namespaces/NS/localqueues` | `list localqueues` in NS | `board.namespace_view` for NS |

The page fetches its data relative to its own address (`clusterqueues` next to the cluster page,
`localqueues` next to a namespace's), so a namespace user who opens their namespace's page reads
only what the RoleBinding of `queuectl-batch-user` opens. `queuectl ui` proxies the same paths
with the user's kubeconfig credentials. Each answer is built from one `board.Snapshot`, taken
while no cycle runs and before the next `await`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from functools import cache
from importlib import resources
from typing import Protocol

from aiohttp import web

from queuectl import convert
from queuectl.api import names
from queuectl.api.resource import Resource
from queuectl.api.views import ObjectView
from queuectl.controller import board, visibility
from queuectl.controller.visibility import PREFIX, Source
from queuectl.controller.watch import kube as k
from queuectl.controller.watch.kube import Obj
from queuectl.core import GPU, Eta, Node, Scheduler, fleet

PAGE_RESOURCE = "webview"
STANDBY_NOTE = "answered by a standby replica: reasons are those the leader last wrote"


class Stores(Protocol):
    def get(self, res: Resource, name: str, namespace: str = "") -> Obj | None: ...

    def store(self, res: Resource) -> Values: ...


class Values(Protocol):
    def values(self) -> list[Obj]: ...


class WebSource(Source, Protocol):
    @property
    def cache(self) -> Stores: ...

    def clock(self) -> float: ...


@cache
def page() -> bytes:
    return resources.files("queuectl.controller").joinpath("webview.html").read_bytes()


def _pod_gpus(pods: Iterable[Obj]) -> dict[str, int]:
    """Node -> GPUs requested by the pods bound to it (the cache holds bound, unfinished pods)."""
    out: dict[str, int] = {}
    for pod in pods:
        spec = ObjectView(pod).spec
        node = spec.get("nodeName")
        if not node:
            continue
        try:
            gpus = convert.pod_requests(spec).get(GPU, 0)
        except (ValueError, TypeError):
            continue
        if gpus:
            out[str(node)] = out.get(str(node), 0) + gpus
    return out


def _node(sched: Scheduler, node: Node, raw: Obj | None, allocated: int) -> board.NodeFacts:
    flavors = sched.flavors().values()
    matching = [
        f.name
        for f in flavors
        if f.node_labels and all(node.labels.get(key) == v for key, v in f.node_labels.items())
    ]
    gpus = node.allocatable.get(GPU, 0)
    view = ObjectView(raw or {})
    ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in view.conditions)
    return board.NodeFacts(
        name=node.name,
        rack=node.labels.get(names.LABEL_TOPOLOGY_RACK, ""),
        flavors=tuple(sorted(matching)),
        gpus=gpus,
        allocated=allocated,
        unhealthy=fleet.unhealthy_gpus([node], names.TAINT_GPU_UNHEALTHY),
        ready=ready if raw is not None else True,
        unschedulable=bool(view.spec.get("unschedulable")),
    )


def take_snapshot(
    sched: Scheduler, cache: Stores, etas: Mapping[str, Eta], now: float, leading: bool
) -> board.Snapshot:
    """What the board shows, read from the core and the cache. Synchronous: the core idle."""
    cohorts = []
    for name in sched.cohort_names():
        cohort = sched.cohorts().get(name)
        quota = fleet.quota_table(sched, name, cohort=True) or ()
        cohorts.append(board.CohortFacts(name, cohort.parent if cohort else None, quota))
    queues = []
    for name, spec in sorted(sched.cluster_queues().items()):
        status = sched.cluster_queue_status(name)
        queues.append(
            board.QueueFacts(
                name=name,
                cohort=spec.cohort,
                active=status is not None and status.active,
                admitted=status.admitted if status is not None else 0,
                quota=fleet.quota_table(sched, name) or (),
                pending=tuple(visibility.pending_items(sched, cache, name, None, leading, etas)),
            )
        )
    local_queues = []
    for lq in cache.store(k.LOCAL_QUEUES).values():
        view = ObjectView(lq)
        cq = str(view.spec.get("clusterQueue") or "")
        local_queues.append(board.LocalQueueFacts(view.namespace, view.name, cq))
    pod_gpus = _pod_gpus(cache.store(k.PODS).values())
    nodes = tuple(
        _node(sched, n, cache.get(k.NODES, n.name), pod_gpus.get(n.name, 0))
        for n in sched.nodes().values()
    )
    notes: tuple[str, ...] = () if leading else (STANDBY_NOTE,)
    if not etas:
        notes += ("no start estimates yet",)
    return board.Snapshot(now, tuple(cohorts), tuple(queues), tuple(local_queues), nodes, notes)


def routes(source: WebSource) -> list[web.RouteDef]:
    """The page and its two data paths, for `visibility.make_app`."""

    async def serve_page(_: web.Request) -> web.Response:
        return web.Response(
            body=page(),
            content_type="text/html",
            charset="utf-8",
            headers={
                # Everything is inline; nothing may load from anywhere else.
                "Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'; "
                "script-src 'unsafe-inline'; connect-src 'self'",
                "Cache-Control": "no-store",
            },
        )

    async def snapshot() -> board.Snapshot:
        etas = await source.estimates()
        sched = await source.core.idle()  # read before the next await
        return take_snapshot(sched, source.cache, etas, source.clock(), source.leading())

    async def cluster(_: web.Request) -> web.Response:
        return web.json_response(board.cluster_view(await snapshot()))

    async def namespace(request: web.Request) -> web.Response:
        ns = request.match_info["namespace"]
        return web.json_response(board.namespace_view(await snapshot(), ns))

    return [
        web.get(f"{PREFIX}/{PAGE_RESOURCE}", serve_page),
        web.get(PREFIX + "/namespaces/{namespace}/" + PAGE_RESOURCE, serve_page),
        web.get(f"{PREFIX}/clusterqueues", cluster),
        web.get(PREFIX + "/namespaces/{namespace}/localqueues", namespace),
    ]
