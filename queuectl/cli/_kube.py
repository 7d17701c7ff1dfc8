"""The CLI's way to the API server: the synchronous `kubernetes` client, dicts, one-line errors.

Every failure a user can meet (no kubeconfig, unreachable server, CRDs not installed, object not
found, access denied) becomes a `CliError` whose message is one sentence saying what to do; the
commands print it and exit non-zero, never with a traceback.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Final

from queuectl.api import names
from queuectl.api.resource import NODES, WORKLOADS, Resource

if TYPE_CHECKING:
    from kubernetes.client import ApiClient

Obj = dict[str, Any]

PAGE_SIZE: Final = 500
TIMEOUT_S: Final = 30.0
CRDS_HINT: Final = "install them with `kubectl apply -f queuectl/crds/` (or the kustomize base)"


class CliError(Exception):
    """A failure to report in one line; `code` is the process exit status."""

    def __init__(self, message: str, code: int = 1) -> None:
        super().__init__(message)
        self.code = code


def _ours(kind: Resource) -> bool:
    return kind.group == names.GROUP


def default_namespace(kubeconfig: str | None, context: str | None) -> str:
    """The namespace of the kubeconfig's (current) context, like kubectl; else `default`."""
    try:
        from kubernetes import config as k8s_config

        contexts, current = k8s_config.list_kube_config_contexts(  # type: ignore[no-untyped-call]
            config_file=kubeconfig
        )
        chosen = next((c for c in contexts if c.get("name") == context), None) if context else None
        ns = ((chosen or current or {}).get("context") or {}).get("namespace")
        return str(ns) if ns else "default"
    except Exception:
        return "default"


PASSED_HEADERS = ("Content-Type", "Content-Security-Policy")
"""What `Kube.raw_get` keeps of an answer's headers."""


class Kube:
    """Dict-in, dict-out calls over one synchronous `ApiClient`."""

    def __init__(self, api: ApiClient) -> None:
        self.api = api
        self._ours_served: bool | None = None

    @classmethod
    def connect(cls, kubeconfig: str | None = None, context: str | None = None) -> Kube:
        """From --kubeconfig / KUBECONFIG / ~/.kube/config, or in-cluster as a fallback."""
        from kubernetes import client as k8s_client
        from kubernetes import config as k8s_config
        from kubernetes.config.config_exception import ConfigException

        configuration = k8s_client.Configuration()
        try:
            k8s_config.load_kube_config(  # type: ignore[no-untyped-call]
                config_file=kubeconfig, context=context, client_configuration=configuration
            )
        except (ConfigException, FileNotFoundError, OSError) as err:
            if kubeconfig is None and context is None and os.environ.get("KUBERNETES_SERVICE_HOST"):
                k8s_config.load_incluster_config(  # type: ignore[no-untyped-call]
                    client_configuration=configuration
                )
            else:
                where = kubeconfig or os.environ.get("KUBECONFIG") or "~/.kube/config"
                if context and "Expected object with name" in str(err):
                    raise CliError(f"context {context!r} is not in the kubeconfig {where}") from err
                raise CliError(
                    f"cannot load a kubeconfig from {where}: {_first_line(err)}; "
                    "pass --kubeconfig FILE or set KUBECONFIG"
                ) from err
        return cls(k8s_client.ApiClient(configuration))

    @property
    def host(self) -> str:
        return str(self.api.configuration.host)

    def close(self) -> None:
        self.api.close()  # type: ignore[no-untyped-call]

    # --- raw --------------------------------------------------------------------------------
    def request(
        self,
        method: str,
        path: str,
        *,
        query: Mapping[str, Any] | None = None,
        body: Any = None,
        content_type: str = "application/json",
    ) -> Obj:
        """One call; raises `ApiFailure` for non-2xx answers, `CliError` when unreachable."""
        from kubernetes.client.exceptions import ApiException
        from urllib3.exceptions import HTTPError

        try:
            request = self.api.param_serialize(
                method,
                path,
                query_params=list((query or {}).items()),
                header_params={"Content-Type": content_type, "Accept": "application/json"},
                body=body,
                auth_settings=["BearerToken"],
            )
            response = self.api.call_api(*request, _request_timeout=TIMEOUT_S)
            data = response.read()  # type: ignore[no-untyped-call]
            if not 200 <= response.status <= 299:
                raise ApiFailure.from_body(response.status, data)
        except ApiException as err:
            raise ApiFailure.of(err) from err
        except HTTPError as err:
            raise CliError(
                f"cannot reach the API server at {self.host}: {_first_line(err)}; "
                "check --kubeconfig/--context and that the cluster is up"
            ) from err
        decoded: Obj = json.loads(data) if data else {}
        return decoded

    def raw_get(
        self, path: str, query: str = "", accept: str = "*/*"
    ) -> tuple[int, dict[str, str], bytes]:
        """GET as is: (status, the headers `PASSED_HEADERS` names, body), whatever the status
        (`queuectl ui` passes the API server's answers on); `CliError` when unreachable."""
        from kubernetes.client.exceptions import ApiException
        from urllib3.exceptions import HTTPError

        try:
            method, url, headers, body, post = self.api.param_serialize(
                "GET", path, header_params={"Accept": accept}, auth_settings=["BearerToken"]
            )
            if query:
                url += ("&" if "?" in url else "?") + query
            response = self.api.call_api(
                method, url, headers, body, post, _request_timeout=TIMEOUT_S
            )
            data = response.read()  # type: ignore[no-untyped-call]
            headers = {}
            for name in PASSED_HEADERS:
                value = response.getheader(name)  # type: ignore[no-untyped-call]
                if value:
                    headers[name] = str(value)
            return int(response.status), headers, bytes(data or b"")
        except ApiException as err:
            json_type = {"Content-Type": "application/json"}
            return int(err.status or 502), json_type, str(err.body or "").encode()
        except HTTPError as err:
            raise CliError(
                f"cannot reach the API server at {self.host}: {_first_line(err)}; "
                "check --kubeconfig/--context and that the cluster is up"
            ) from err

    def _call(self, kind: Resource, what: str, method: str, path: str, **kw: Any) -> Obj:
        try:
            return self.request(method, path, **kw)
        except ApiFailure as err:
            raise self.explain_failure(err, kind, what) from err

    def explain_failure(self, err: ApiFailure, kind: Resource, what: str) -> CliError:
        """Turn an API failure into the sentence a user needs."""
        if err.status == 404:
            if _ours(kind) and not self.crds_installed():
                return CliError(
                    f"the queuectl CRDs are not installed in the cluster at {self.host} "
                    f"(no API {names.API_VERSION}); {CRDS_HINT}"
                )
            if not _ours(kind) and kind.group and not self.served(kind):
                return CliError(
                    f"the cluster at {self.host} does not serve {kind.kind} (no {kind.plural} in "
                    f"{kind.group or 'core'}/{kind.version}); install its operator's CRDs first"
                )
            return CliError(f"{what} not found")
        if err.status == 403:
            return CliError(f"access denied: {err.message}")
        if err.status == 401:
            return CliError(
                f"the API server at {self.host} refused the kubeconfig's credentials "
                "(401 Unauthorized)"
            )
        return CliError(f"{what}: the API server answered {err.status}: {err.message}")

    def crds_installed(self) -> bool:
        if self._ours_served is None:
            try:
                found = self.request("GET", WORKLOADS.discovery_path())
                self._ours_served = bool(found.get("resources"))
            except ApiFailure as err:
                if err.status != 404:
                    raise self.explain_failure(err, NODES, "API discovery") from err
                self._ours_served = False
        return self._ours_served

    def served(self, kind: Resource) -> bool:
        """Whether the API server serves `kind` (an operator's CRD may not be installed)."""
        try:
            found = self.request("GET", kind.discovery_path())
        except ApiFailure as err:
            if err.status == 404:
                return False
            raise self.explain_failure(err, NODES, "API discovery") from err
        return any(r.get("name") == kind.plural for r in found.get("resources") or ())

    # --- conveniences -----------------------------------------------------------------------
    def get(self, kind: Resource, name: str, namespace: str | None = None) -> Obj:
        where = f" in namespace {namespace}" if kind.namespaced and namespace else ""
        return self._call(kind, f'{kind.kind} "{name}"{where}', "GET", kind.path(namespace, name))

    def list(
        self, kind: Resource, namespace: str | None = None, label_selector: str | None = None
    ) -> list[Obj]:
        """Every object of a kind (all namespaces when `namespace` is None; only those
        `label_selector` selects when given), page by page."""
        items: list[Obj] = []
        cont = ""
        what = f"{kind.plural}" + (f" in namespace {namespace}" if namespace else "")
        while True:
            query: dict[str, Any] = {"limit": PAGE_SIZE}
            if label_selector:
                query["labelSelector"] = label_selector
            if cont:
                query["continue"] = cont
            page = self._call(kind, what, "GET", kind.path(namespace), query=query)
            for item in page.get("items") or ():
                item.setdefault("kind", kind.kind)
                (item.get("metadata") or {}).pop("managedFields", None)
                items.append(item)
            cont = (page.get("metadata") or {}).get("continue") or ""
            if not cont:
                return items

    def merge_patch(
        self, kind: Resource, name: str, patch: Obj, namespace: str | None = None
    ) -> Obj:
        where = f" in namespace {namespace}" if kind.namespaced and namespace else ""
        return self._call(
            kind,
            f'{kind.kind} "{name}"{where}',
            "PATCH",
            kind.path(namespace, name),
            body=patch,
            query={"fieldManager": "queuectl-cli"},
            content_type="application/merge-patch+json",
        )


class ApiFailure(Exception):
    """A non-2xx answer: status code and the Status message."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"{status}: {message}")
        self.status = status
        self.message = message

    @classmethod
    def from_body(cls, status: int, data: bytes | None) -> ApiFailure:
        message = ""
        if data:
            try:
                message = str(json.loads(data).get("message") or "")
            except (ValueError, AttributeError):
                message = _first_line(data.decode(errors="replace"))
        return cls(status, message or f"HTTP {status}")

    @classmethod
    def of(cls, err: Any) -> ApiFailure:
        status = int(getattr(err, "status", 0) or 0)
        message = str(getattr(err, "reason", "") or "")
        body = getattr(err, "body", None)
        if body:
            try:
                message = json.loads(body).get("message") or message
            except (ValueError, AttributeError):
                message = _first_line(body)
        return cls(status, message)


def _first_line(err: object) -> str:
    text = str(err).strip()
    return text.splitlines()[0] if text else type(err).__name__
