"""Where a kind lives in the REST tree, and the plain-dict shape objects travel in.

Below the controller so that job kinds (queuectl.jobs) and the webhooks can name the resource
they handle without importing the controller's HTTP layer. Not to be confused with
`queuectl.api.Resource`, the typed model base of queuectl's own CRDs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

Obj = dict[str, Any]


@dataclass(frozen=True)
class Resource:
    """Where a kind lives in the REST tree."""

    group: str
    version: str
    plural: str
    namespaced: bool
    kind: str

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    def path(self, namespace: str | None = None, name: str | None = None, sub: str = "") -> str:
        base = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        if self.namespaced and namespace:
            base += f"/namespaces/{quote(namespace, safe='')}"
        base += f"/{self.plural}"
        if name is not None:
            base += f"/{quote(name, safe='')}"
            if sub:
                base += f"/{sub}"
        return base

    def discovery_path(self) -> str:
        """The group-version's discovery document: lists `plural` once its CRD is served."""
        return f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
