"""The visibility API's listener and, out of cluster, its registration with the API server.

The handlers live in `queuectl.controller.visibility`; this module joins them to the webhook
certificate (`webhooks.tls`, with the front-proxy CA as the client CA) and to the cluster:

- the front-proxy settings come from the ConfigMap kube-system/extension-apiserver-authentication
  that every kube-apiserver with an aggregation layer publishes; without it the API is not
  served (a cluster without `--requestheader-client-ca-file` cannot proxy to it anyway);
- in cluster the kustomize base ships the APIService and the webhook Service's `visibility` port;
- out of cluster (`--register-visibility`) the controller writes the APIService and, when the
  webhook Service does not exist, an ExternalName Service `queuectl-webhook` naming 127.0.0.1:
  the aggregator resolves an ExternalName Service to that host and the APIService's port, and
  verifies the certificate for `queuectl-webhook.<namespace>.svc`, which the webhook certificate
  already names. No Endpoints are needed (they may not name a loopback address).
"""

from __future__ import annotations

import base64
import logging
import os
from typing import Any

from aiohttp import web

from queuectl.api import names
from queuectl.api.resource import Resource
from queuectl.controller import visibility, webview
from queuectl.controller.visibility import FrontProxy
from queuectl.controller.watch.kube import Kube, KubeError
from queuectl.controller.webview import WebSource
from queuectl.webhooks.tls import ReloadingTLS

log = logging.getLogger(__name__)

CONFIG_MAPS = Resource("", "v1", "configmaps", True, "ConfigMap")
SERVICES = Resource("", "v1", "services", True, "Service")
API_SERVICES = Resource("apiregistration.k8s.io", "v1", "apiservices", False, "APIService")


async def read_front_proxy(kube: Kube) -> FrontProxy | None:
    """The API server's requestheader settings; None (logged) when it publishes none."""
    namespace, name = visibility.AUTH_CONFIGMAP
    try:
        cm = await kube.get(CONFIG_MAPS, name, namespace)
    except KubeError as err:
        log.warning("visibility API not served: cannot read %s/%s: %s", namespace, name, err)
        return None
    proxy = FrontProxy.from_configmap(cm.get("data") or {})
    if proxy is None:
        log.warning(
            "visibility API not served: the API server publishes no requestheader client CA "
            "(kube-apiserver needs --requestheader-client-ca-file and --proxy-client-cert-file)"
        )
    return proxy


async def start_visibility_server(
    host: str,
    port: int,
    cert_dir: str | os.PathLike[str],
    source: WebSource,
    proxy: FrontProxy,
) -> web.AppRunner:
    """HTTPS with the webhook certificate, asking for a client certificate from the front
    proxy's CA: the pending lists and the web view (`controller/webview.py`). Port 0 picks a
    free port."""
    tls = ReloadingTLS(cert_dir, client_ca=proxy.client_ca)
    app = visibility.make_app(source, proxy, extra=webview.routes(source))
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, host, port, ssl_context=tls.base).start()
    log.info("visibility API listening on https://%s:%d", host, bound_port(runner))
    return runner


def bound_port(runner: web.AppRunner) -> int:
    for address in runner.addresses:
        if isinstance(address, tuple):
            return int(address[1])
    raise RuntimeError("the visibility server is not listening")


def api_service(namespace: str, port: int, ca_bundle: bytes | None) -> dict[str, Any]:
    """The APIService, as the kustomize base ships it (port: the Service's port there)."""
    spec: dict[str, Any] = {
        "group": names.VISIBILITY_GROUP,
        "version": names.VISIBILITY_VERSION,
        "groupPriorityMinimum": 100,
        "versionPriority": 100,
        "service": {"name": names.WEBHOOK_SERVICE, "namespace": namespace, "port": port},
    }
    if ca_bundle:
        spec["caBundle"] = base64.b64encode(ca_bundle).decode()
    return {
        "apiVersion": "apiregistration.k8s.io/v1",
        "kind": "APIService",
        "metadata": {
            "name": names.VISIBILITY_API_SERVICE,
            "labels": {"app.kubernetes.io/name": "queuectl"},
        },
        "spec": spec,
    }


def local_service(namespace: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {
            "name": names.WEBHOOK_SERVICE,
            "namespace": namespace,
            "labels": {"app.kubernetes.io/name": "queuectl"},
        },
        "spec": {"type": "ExternalName", "externalName": "127.0.0.1"},
    }


async def register(kube: Kube, namespace: str, port: int, ca_bundle: bytes | None) -> None:
    """Out of cluster: point the APIService at this process's listener on 127.0.0.1:port."""
    try:
        await kube.create(SERVICES, local_service(namespace), namespace)
    except KubeError as err:
        if not err.conflict:
            raise
    obj = api_service(namespace, port, ca_bundle)
    try:
        current = await kube.get(API_SERVICES, names.VISIBILITY_API_SERVICE)
    except KubeError as err:
        if not err.not_found:
            raise
        await kube.create(API_SERVICES, obj)
        return
    obj["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
    await kube.request("PUT", API_SERVICES.path(None, names.VISIBILITY_API_SERVICE), body=obj)


async def unregister(kube: Kube, namespace: str) -> None:
    """Remove what `register` wrote: an APIService nobody serves fails discovery cluster-wide
    (namespace deletion and garbage collection wait on it). A webhook Service that is not the
    ExternalName one `register` writes is an installation's and stays."""
    try:
        await kube.delete(API_SERVICES, names.VISIBILITY_API_SERVICE)
        service = await kube.get(SERVICES, names.WEBHOOK_SERVICE, namespace)
        if service.get("spec", {}).get("type") == "ExternalName":
            await kube.delete(SERVICES, names.WEBHOOK_SERVICE, namespace)
    except KubeError as err:
        if not err.not_found:
            log.warning("could not remove the visibility APIService or its Service: %s", err)
