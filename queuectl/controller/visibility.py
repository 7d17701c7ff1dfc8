"""The visibility API (`visibility.queuectl.io/v1beta1`): pending workloads in scheduling order.

An aggregated API: the kube-apiserver authenticates the caller, authorizes the subresource with
RBAC (`get localqueues/pendingworkloads` in a namespace, `get clusterqueues/pendingworkloads`
cluster-wide) and proxies the request here over TLS, presenting its front-proxy client
certificate and the caller's identity in headers. So this server trusts a request only when
that certificate verifies against the requestheader CA (the TLS layer checks the chain; here
its common name must be one of the allowed names) and names a user; everything else is refused
before a path is read. The lists are read from the core while no cycle runs, in the order the
cycle tries them (`fleet.pending_order`), with the core's own reason for each.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from aiohttp import web

from queuectl import convert
from queuectl.api import names
from queuectl.api.resource import Resource
from queuectl.api.views import ObjectView, WorkloadView
from queuectl.controller.feed.corethread import CoreThread
from queuectl.controller.watch import kube as k
from queuectl.controller.watch.kube import Obj
from queuectl.core import ETA_ASSUMES, Eta, Scheduler, fleet

log = logging.getLogger(__name__)

GROUP = "visibility.queuectl.io"
VERSION = "v1beta1"
GROUP_VERSION = f"{GROUP}/{VERSION}"
PREFIX = f"/apis/{GROUP}/{VERSION}"
SUBRESOURCE = "pendingworkloads"
SUMMARY_KIND = "PendingWorkloadsSummary"
AUTH_CONFIGMAP = ("kube-system", "extension-apiserver-authentication")
"""Where the kube-apiserver publishes its front-proxy (requestheader) settings."""
MAX_LIMIT = 1000
"""The most items one answer carries (`?limit=`); Kueue's default is the same."""

PeerCert = Callable[[web.Request], Mapping[str, Any] | None]
"""The verified client certificate of a request's connection (ssl's getpeercert() dict)."""


@dataclass(frozen=True)
class FrontProxy:
    """The kube-apiserver's requestheader settings, as its ConfigMap publishes them."""

    client_ca: bytes
    allowed_names: tuple[str, ...] = ()
    """Common names the front-proxy certificate may carry; empty: any the CA signed."""
    username_headers: tuple[str, ...] = ("X-Remote-User",)
    group_headers: tuple[str, ...] = ("X-Remote-Group",)

    @classmethod
    def from_configmap(cls, data: Mapping[str, str]) -> FrontProxy | None:
        """None when the API server publishes no requestheader CA (no aggregation layer)."""
        ca = data.get("requestheader-client-ca-file", "").strip()
        if not ca:
            return None

        def names(key: str, default: tuple[str, ...]) -> tuple[str, ...]:
            raw = data.get(key)
            return tuple(json.loads(raw)) if raw else default

        return cls(
            client_ca=ca.encode() + b"\n",
            allowed_names=names("requestheader-allowed-names", ()),
            username_headers=names("requestheader-username-headers", cls.username_headers),
            group_headers=names("requestheader-group-headers", cls.group_headers),
        )


def transport_peer_cert(request: web.Request) -> Mapping[str, Any] | None:
    transport = request.transport
    return None if transport is None else transport.get_extra_info("peercert")


def _common_name(cert: Mapping[str, Any]) -> str | None:
    for rdn in cert.get("subject", ()):
        for key, value in rdn:
            if key == "commonName":
                return str(value)
    return None


@dataclass(frozen=True)
class Caller:
    user: str
    groups: tuple[str, ...]


def authenticate(request: web.Request, proxy: FrontProxy, peer: PeerCert) -> Caller | web.Response:
    """The caller the aggregator vouches for, or the 401 that answers anyone else."""
    cert = peer(request)
    if not cert:
        return _status(401, "Unauthorized", "no front-proxy client certificate was presented")
    cn = _common_name(cert)
    if proxy.allowed_names and cn not in proxy.allowed_names:
        return _status(401, "Unauthorized", f"client certificate {cn!r} is not a front proxy")
    user = next((request.headers[h] for h in proxy.username_headers if h in request.headers), "")
    if not user:
        return _status(401, "Unauthorized", "the front proxy named no user")
    groups = tuple(g for h in proxy.group_headers for g in request.headers.getall(h, ()))
    return Caller(user, groups)


def _status(code: int, reason: str, message: str) -> web.Response:
    """A Kubernetes Status, as kubectl prints it."""
    body = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    }
    return web.json_response(body, status=code)


# --- the lists --------------------------------------------------------------------------------
class Objects(Protocol):
    def get(self, res: Resource, name: str, namespace: str = "") -> Obj | None: ...


class Source(Protocol):
    """What the handlers read: the controller's cache (`Objects`) and its core."""

    @property
    def cache(self) -> Objects: ...

    @property
    def core(self) -> CoreThread: ...

    def leading(self) -> bool:
        """Only the leader runs cycles; a standby's core has the same line, not the reasons."""
        ...

    async def estimates(self) -> Mapping[str, Eta]:
        """Workload key -> estimated start, kept between refreshes (`controller/etas.py`)."""
        ...


def _reason(sched: Scheduler, view: WorkloadView, key: str, leading: bool) -> tuple[Any, Any]:
    """The core's reason on the leader; on a standby, the one the leader wrote on the Workload."""
    if leading:
        info = sched.pending_info(key)
        return (info.reason, info.message) if info is not None else (None, None)
    cond = view.condition(names.COND_QUOTA_RESERVED) or {}
    return cond.get("reason"), cond.get("message")


NOT_ESTIMATED = "not estimated yet: it came after the last estimate"


def _estimate(eta: Eta | None) -> tuple[str | None, str]:
    """(estimatedStartTime, estimatedStartMessage): the time with what it assumes, or why
    there is none."""
    if eta is None:
        return None, NOT_ESTIMATED
    if eta.start is None:
        return None, f"unknown: {eta.why}"
    return convert.format_time(eta.start), ETA_ASSUMES


def _item(
    sched: Scheduler,
    wl: Mapping[str, Any],
    key: str,
    pos: tuple[int, int],
    leading: bool,
    eta: Eta | None,
) -> Any:
    view = WorkloadView(wl)
    start, assumes = _estimate(eta)
    reason, message = _reason(sched, view, key, leading)
    core_wl = sched.workloads().get(key)
    meta = view.meta
    return {
        "metadata": {
            "name": view.name,
            "namespace": view.namespace,
            "creationTimestamp": meta.get("creationTimestamp"),
            "uid": meta.get("uid"),
        },
        "localQueueName": view.queue_name,
        "priority": core_wl.priority if core_wl is not None else 0,
        "positionInClusterQueue": pos[0],
        "positionInLocalQueue": pos[1],
        "reason": reason,
        "message": message,
        "estimatedStartTime": start,
        "estimatedStartMessage": assumes,
    }


def pending_items(
    sched: Scheduler,
    cache: Objects,
    cluster_queue: str,
    local_queue: tuple[str, str] | None,
    leading: bool = True,
    etas: Mapping[str, Eta] | None = None,
) -> list[Any]:
    """The ClusterQueue's line (only `local_queue`'s part when given), each with its 0-based
    position in the ClusterQueue and in its LocalQueue and its estimated start from `etas`.
    Synchronous: call it with the core idle."""
    items = []
    per_lq: dict[tuple[str, str], int] = {}
    for pos_cq, key in enumerate(fleet.pending_order(sched, cluster_queue)):
        namespace, _, name = key.partition("/")
        wl = cache.get(k.WORKLOADS, name, namespace)
        if wl is None:
            continue
        lq = (namespace, WorkloadView(wl).queue_name)
        pos_lq = per_lq.get(lq, 0)
        per_lq[lq] = pos_lq + 1
        if local_queue is None or lq == local_queue:
            eta = (etas or {}).get(key)
            items.append(_item(sched, wl, key, (pos_cq, pos_lq), leading, eta))
    return items


def _page(request: web.Request) -> tuple[int, int] | web.Response:
    out = []
    for param, default, low in (("limit", MAX_LIMIT, 1), ("offset", 0, 0)):
        raw = request.query.get(param)
        try:
            value = default if raw is None else int(raw)
        except ValueError:
            value = -1
        if value < low:
            what = f"an integer >= {low}"
            return _status(400, "BadRequest", f"{param}={raw!r} is not {what}")
        out.append(min(value, MAX_LIMIT) if param == "limit" else value)
    return out[0], out[1]


def _summary(items: Sequence[Any], limit: int, offset: int) -> web.Response:
    body = {
        "kind": SUMMARY_KIND,
        "apiVersion": GROUP_VERSION,
        "metadata": {},
        "items": list(items[offset : offset + limit]),
    }
    return web.json_response(body)


def _resources() -> dict[str, Any]:
    """Discovery names the lists only: the web view's paths (`webview.py`) are for browsers and
    `queuectl ui`, and a `list` verb here would offer `kubectl get` an answer it cannot print."""

    def resource(name: str, kind: str, namespaced: bool) -> dict[str, Any]:
        return {
            "name": name,
            "singularName": "",
            "namespaced": namespaced,
            "kind": kind,
            "verbs": ["get"],
        }

    return {
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": GROUP_VERSION,
        "resources": [
            resource("clusterqueues", "ClusterQueue", False),
            resource(f"clusterqueues/{SUBRESOURCE}", SUMMARY_KIND, False),
            resource("localqueues", "LocalQueue", True),
            resource(f"localqueues/{SUBRESOURCE}", SUMMARY_KIND, True),
        ],
    }


def make_app(
    source: Source,
    proxy: FrontProxy,
    peer: PeerCert = transport_peer_cert,
    extra: Sequence[web.RouteDef] = (),
) -> web.Application:
    """The routes: discovery, the two lists, `extra` (the web view's, `webview.routes`), and a
    404 naming the known paths for any other."""

    @web.middleware
    async def front_proxy_only(
        request: web.Request, handler: Callable[[web.Request], Any]
    ) -> web.StreamResponse:
        caller = authenticate(request, proxy, peer)
        if isinstance(caller, web.Response):
            log.info("visibility request to %s refused: %s", request.path, caller.text)
            return caller
        log.debug("visibility GET %s for %s %s", request.path, caller.user, caller.groups)
        response: web.StreamResponse = await handler(request)
        return response

    async def discovery(_: web.Request) -> web.Response:
        return web.json_response(_resources())

    async def group(_: web.Request) -> web.Response:
        version = {"groupVersion": GROUP_VERSION, "version": VERSION}
        body = {
            "kind": "APIGroup",
            "apiVersion": "v1",
            "name": GROUP,
            "versions": [version],
            "preferredVersion": version,
        }
        return web.json_response(body)

    async def local_queue(request: web.Request) -> web.Response:
        page = _page(request)
        if isinstance(page, web.Response):
            return page
        ns, name = request.match_info["namespace"], request.match_info["name"]
        lq = source.cache.get(k.LOCAL_QUEUES, name, ns)
        if lq is None:
            return _status(404, "NotFound", f'localqueues "{name}" not found in namespace {ns}')
        cq = str(ObjectView(lq).spec.get("clusterQueue") or "")
        etas = await source.estimates()
        sched = await source.core.idle()  # read before the next await
        items = pending_items(sched, source.cache, cq, (ns, name), source.leading(), etas)
        return _summary(items, *page)

    async def cluster_queue(request: web.Request) -> web.Response:
        page = _page(request)
        if isinstance(page, web.Response):
            return page
        name = request.match_info["name"]
        if source.cache.get(k.CLUSTER_QUEUES, name) is None:
            return _status(404, "NotFound", f'clusterqueues "{name}" not found')
        etas = await source.estimates()
        sched = await source.core.idle()
        return _summary(
            pending_items(sched, source.cache, name, None, source.leading(), etas), *page
        )

    async def not_found(request: web.Request) -> web.Response:
        return _status(
            404,
            "NotFound",
            f"no such path {request.path}; this API serves "
            f"{PREFIX}/namespaces/NS/localqueues/NAME/{SUBRESOURCE} and "
            f"{PREFIX}/clusterqueues/NAME/{SUBRESOURCE}",
        )

    app = web.Application(middlewares=[front_proxy_only])
    app.router.add_get(f"/apis/{GROUP}", group)
    app.router.add_get(PREFIX, discovery)
    app.router.add_get(
        PREFIX + "/namespaces/{namespace}/localqueues/{name}/" + SUBRESOURCE, local_queue
    )
    app.router.add_get(PREFIX + "/clusterqueues/{name}/" + SUBRESOURCE, cluster_queue)
    app.router.add_routes(extra)
    app.router.add_route("*", "/{tail:.*}", not_found)
    return app
