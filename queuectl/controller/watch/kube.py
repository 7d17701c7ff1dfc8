"""A thin async REST layer over kubernetes_asyncio that speaks plain dicts.

The generated model classes cost a deserialisation per object, which matters at tens of thousands
of Jobs and Workloads, and they know nothing of our CRDs. Every call here goes through the
`ApiClient` (so its authentication, TLS and connection pool apply) with `_preload_content=False`
and decodes JSON once. Where each kind lives is `queuectl.api.resource`'s one list; the names
are imported here so the controller says `k.WORKLOADS`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Final

import aiohttp
from kubernetes_asyncio import client as k8s_client
from kubernetes_asyncio import config as k8s_config

from queuectl.api import names
from queuectl.api.errors import is_transient
from queuectl.api.resource import ADMISSION_CHECKS as ADMISSION_CHECKS
from queuectl.api.resource import CLUSTER_QUEUES as CLUSTER_QUEUES
from queuectl.api.resource import COHORTS as COHORTS
from queuectl.api.resource import LOCAL_QUEUES as LOCAL_QUEUES
from queuectl.api.resource import NAMESPACES as NAMESPACES
from queuectl.api.resource import NODES as NODES
from queuectl.api.resource import PODS as PODS
from queuectl.api.resource import PRIORITY_CLASSES as PRIORITY_CLASSES
from queuectl.api.resource import PRIORITY_CLASSES_OURS as PRIORITY_CLASSES_OURS
from queuectl.api.resource import RESOURCE_FLAVORS as RESOURCE_FLAVORS
from queuectl.api.resource import TOPOLOGIES as TOPOLOGIES
from queuectl.api.resource import WORKLOADS as WORKLOADS
from queuectl.api.resource import Obj as Obj
from queuectl.api.resource import Resource
from queuectl.jobs.batch import JOBS as JOBS

JSON: Final = "application/json"
MERGE_PATCH: Final = "application/merge-patch+json"
JSON_PATCH: Final = "application/json-patch+json"
APPLY_PATCH: Final = "application/apply-patch+yaml"

READ_TIMEOUT_S = 30.0
WRITE_TIMEOUT_S = 10.0


class KubeError(Exception):
    """A non-2xx answer from the API server, with its status code and Status reason."""

    def __init__(self, status: int, reason: str, message: str) -> None:
        super().__init__(f"{status} {reason}: {message}")
        self.status = status
        self.reason = reason
        self.message = message

    @property
    def conflict(self) -> bool:
        return self.status == 409

    @property
    def not_found(self) -> bool:
        return self.status == 404

    @property
    def gone(self) -> bool:
        return self.status == 410


def api_trouble(err: BaseException) -> bool:
    """What a controller loop logs and retries instead of dying of: transient trouble
    (`is_transient`: transport errors, timeouts, 5xx, 429) or any other answer of the API
    server. Anything else is a bug and keeps its traceback."""
    return is_transient(err) or isinstance(err, KubeError)


EVENTS: Final = Resource("events.k8s.io", "v1", "events", True, "Event")
LEASES: Final = Resource("coordination.k8s.io", "v1", "leases", True, "Lease")


_PLURALS: Final = frozenset(
    {
        "jobs",
        "pods",
        "nodes",
        "namespaces",
        "events",
        "priorityclasses",
        "leases",
        "workloads",
        "localqueues",
        "clusterqueues",
        "cohorts",
        "resourceflavors",
        "topologies",
        "workloadpriorityclasses",
        "customresourcedefinitions",
        "selfsubjectreviews",
    }
)


class Kube:
    """Dict-in, dict-out API calls sharing one `ApiClient`."""

    def __init__(self, api_client: k8s_client.ApiClient) -> None:
        self.api_client = api_client
        self.calls: dict[tuple[str, str], int] = {}
        """(method, resource plural) -> requests made: what the controller costs the server."""

    @classmethod
    async def connect(cls, kubeconfig: str | None) -> Kube:
        """From a kubeconfig file, or the in-cluster service account when `kubeconfig` is None."""
        configuration = k8s_client.Configuration()
        if kubeconfig:
            await k8s_config.load_kube_config(
                config_file=kubeconfig, client_configuration=configuration
            )
        else:
            k8s_config.load_incluster_config(  # type: ignore[no-untyped-call]
                client_configuration=configuration
            )
        configuration.connection_pool_maxsize = 64
        return cls(k8s_client.ApiClient(configuration))

    async def close(self) -> None:
        await self.api_client.close()

    async def raw(
        self,
        method: str,
        path: str,
        *,
        query: Mapping[str, Any] | None = None,
        body: Any = None,
        content_type: str = JSON,
        timeout: float | aiohttp.ClientTimeout | None = 30.0,
    ) -> aiohttp.ClientResponse:
        """The open response; the caller reads it (watch streams) and releases it."""
        parts = path.split("?")[0].split("/")
        plural = next((p for p in reversed(parts) if p in _PLURALS), parts[-1])
        sub = "/status" if path.endswith("/status") else ""
        call = (method, plural + sub)
        self.calls[call] = self.calls.get(call, 0) + 1
        response: aiohttp.ClientResponse = await self.api_client.call_api(
            path,
            method,
            query_params=list((query or {}).items()),
            header_params={"Content-Type": content_type, "Accept": JSON},
            body=body,
            auth_settings=["BearerToken"],
            _preload_content=False,
            _request_timeout=timeout,
        )
        return response

    async def request(
        self,
        method: str,
        path: str,
        *,
        query: Mapping[str, Any] | None = None,
        body: Any = None,
        content_type: str = JSON,
        timeout: float | None = None,
    ) -> Obj:
        """One call, decoded; a non-2xx answer raises KubeError. Without `timeout`, a read may
        take READ_TIMEOUT_S and a write WRITE_TIMEOUT_S: a write that hangs is settled as lost
        in transit (settle.py), so its bound is how long admissions stall behind a stuck one."""
        if timeout is None:
            timeout = READ_TIMEOUT_S if method == "GET" else WRITE_TIMEOUT_S
        response = await self.raw(
            method, path, query=query, body=body, content_type=content_type, timeout=timeout
        )
        async with response:
            data = await response.read()
            status = response.status
        decoded: Obj = json.loads(data) if data else {}
        if not 200 <= status <= 299:
            raise KubeError(
                status, str(decoded.get("reason", "")), str(decoded.get("message", data[:500]))
            )
        return decoded

    # --- conveniences -------------------------------------------------------------------
    async def get(self, res: Resource, name: str, namespace: str | None = None) -> Obj:
        return await self.request("GET", res.path(namespace, name))

    async def list(self, res: Resource, namespace: str | None = None, **query: Any) -> Obj:
        return await self.request("GET", res.path(namespace), query=query)

    async def create(self, res: Resource, body: Obj, namespace: str | None = None) -> Obj:
        return await self.request(
            "POST", res.path(namespace), body=body, query={"fieldManager": names.FIELD_MANAGER}
        )

    async def replace_status(self, res: Resource, body: Obj) -> Obj:
        """PUT the status subresource; body carries metadata.resourceVersion, so a stale
        writer gets 409 Conflict instead of overwriting a newer decision."""
        meta = body["metadata"]
        return await self.request(
            "PUT",
            res.path(meta.get("namespace"), meta["name"], "status"),
            body=body,
            query={"fieldManager": names.FIELD_MANAGER},
        )

    async def patch(
        self,
        res: Resource,
        name: str,
        patch: Any,
        namespace: str | None = None,
        *,
        content_type: str = MERGE_PATCH,
        sub: str = "",
        force: bool = False,
    ) -> Obj:
        query: dict[str, Any] = {"fieldManager": names.FIELD_MANAGER}
        if force:
            query["force"] = "true"
        return await self.request(
            "PATCH",
            res.path(namespace, name, sub),
            body=patch,
            content_type=content_type,
            query=query,
        )

    async def delete(
        self,
        res: Resource,
        name: str,
        namespace: str | None = None,
        *,
        propagation: str = "Background",
        grace_period_s: int | None = None,
    ) -> Obj:
        """`grace_period_s=0` force-deletes a pod (what `kubectl delete --force` asks)."""
        body: dict[str, Any] = {"propagationPolicy": propagation}
        if grace_period_s is not None:
            body["gracePeriodSeconds"] = grace_period_s
        return await self.request("DELETE", res.path(namespace, name), body=body)
