"""The agent's only Kubernetes access: read its own Node, patch it (metadata/spec) and its status.

Raw JSON both ways (`_preload_content=False`), so the pure `NodeView`/`NodePatch` code sees the
API server's own camelCase shape. Needs RBAC `get, patch` on `nodes` and `patch` on `nodes/status`.
"""

from __future__ import annotations

import json
from typing import Any, Protocol

from kubernetes_asyncio import client as k8s
from kubernetes_asyncio.client.exceptions import ApiException

from queuectl.agent.nodestate import NodePatch, NodeView
from queuectl.api import names

MERGE_PATCH = "application/merge-patch+json"
STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json"


class Conflict(Exception):
    """The Node changed since it was read (its taints, under our resourceVersion precondition)."""


class NodeClient(Protocol):
    async def get(self, name: str) -> NodeView: ...

    async def patch(self, name: str, patch: NodePatch) -> NodeView: ...


class KubeNodeClient:
    """`NodeClient` over kubernetes_asyncio."""

    def __init__(self, api_client: k8s.ApiClient) -> None:
        self._core = k8s.CoreV1Api(api_client)

    async def _raw(self, coro: Any) -> dict[str, Any]:
        """The JSON body of a response. With `_preload_content=False` the client does not check
        the status itself, so this does: 409 is `Conflict`, any other non-2xx an `ApiException`."""
        try:
            response = await coro
        except ApiException as exc:
            if exc.status == 409:
                raise Conflict(str(exc.reason)) from exc
            raise
        body = await response.read()
        if response.status == 409:
            raise Conflict(body.decode(errors="replace"))
        if not 200 <= response.status <= 299:
            raise ApiException(status=response.status, reason=body.decode(errors="replace"))
        data: dict[str, Any] = json.loads(body)
        return data

    async def get(self, name: str) -> NodeView:
        return NodeView.from_dict(
            await self._raw(self._core.read_node(name, _preload_content=False))
        )

    async def patch(self, name: str, patch: NodePatch) -> NodeView:
        """Apply the metadata/spec patch, then the status patch; return the Node as written."""
        node: dict[str, Any] | None = None
        if patch.node is not None:
            node = await self._raw(
                self._core.patch_node(  # type: ignore[call-arg]  # stubs lack _content_type
                    name,
                    patch.node,
                    field_manager=names.AGENT_FIELD_MANAGER,
                    _content_type=MERGE_PATCH,
                    _preload_content=False,
                )
            )
        if patch.status is not None:
            node = await self._raw(
                self._core.patch_node_status(  # type: ignore[call-arg]
                    name,
                    patch.status,
                    field_manager=names.AGENT_FIELD_MANAGER,
                    _content_type=STRATEGIC_MERGE_PATCH,
                    _preload_content=False,
                )
            )
        if node is None:
            return await self.get(name)
        return NodeView.from_dict(node)
