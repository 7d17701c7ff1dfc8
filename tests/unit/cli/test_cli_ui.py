"""`queuectl ui`: a local, read-only pass-through to the visibility API with the user's
credentials; it opens the cluster view only for those who may read it."""

from __future__ import annotations

import http.client
import threading
from collections.abc import Iterator
from typing import Any, cast

import pytest

from queuectl.cli import ui
from queuectl.cli._kube import ApiFailure, Kube

PAGE = f"{ui.PREFIX}/webview"


class FakeKube:
    def __init__(self, allowed: bool | None) -> None:
        self.allowed = allowed
        self.gets: list[tuple[str, str]] = []

    def request(self, method: str, path: str, **kw: Any) -> Any:
        if self.allowed is None:
            raise ApiFailure(403, "selfsubjectaccessreviews is forbidden")
        return {"status": {"allowed": self.allowed}}

    def raw_get(self, path: str, query: str = "") -> tuple[int, dict[str, str], bytes]:
        self.gets.append((path, query))
        if "team-b" in path:
            return 403, {"Content-Type": "application/json"}, b'{"kind":"Status","code":403}'
        page = {"Content-Type": "text/html", "Content-Security-Policy": "default-src 'none'"}
        return 200, page, b"<html>page</html>"


@pytest.mark.parametrize(
    ("allowed", "ns", "page", "noted"),
    [
        (True, None, PAGE, False),
        (False, None, f"{ui.PREFIX}/namespaces/team-a/webview", True),
        (None, None, f"{ui.PREFIX}/namespaces/team-a/webview", True),  # may not even ask
        (True, "team-c", f"{ui.PREFIX}/namespaces/team-c/webview", False),
    ],
)
def test_the_start_page_is_the_cluster_view_only_for_who_may_read_it(
    allowed: bool | None, ns: str | None, page: str, noted: bool
) -> None:
    start, note = ui.start_page(cast(Kube, FakeKube(allowed)), ns, "team-a")
    assert start == page
    assert (note is not None) == noted
    if note:
        assert "team-a" in note and "-n NAMESPACE" in note


@pytest.fixture
def served() -> Iterator[tuple[int, FakeKube]]:
    kube = FakeKube(True)
    server = ui.make_server(cast(Kube, kube), "127.0.0.1", 0, PAGE)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server.server_address[1], kube
    server.shutdown()
    server.server_close()


def _get(port: int, path: str, host: str = "127.0.0.1") -> tuple[int, str, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    conn.request("GET", path, headers={"Host": f"{host}:{port}"})
    r = conn.getresponse()
    out = r.status, r.getheader("Location") or r.getheader("Content-Type") or "", r.read()
    HEADERS[path] = dict(r.getheaders())
    conn.close()
    return out


HEADERS: dict[str, dict[str, str]] = {}


def test_the_proxy_passes_the_visibility_api_through_and_nothing_else(
    served: tuple[int, FakeKube],
) -> None:
    port, kube = served
    assert _get(port, "/")[:2] == (302, PAGE)
    assert _get(port, PAGE) == (200, "text/html", b"<html>page</html>")
    assert HEADERS[PAGE]["Content-Security-Policy"] == "default-src 'none'"  # passed on
    status, _, body = _get(port, f"{ui.PREFIX}/namespaces/team-b/localqueues?x=1")
    assert status == 403 and b'"code":403' in body  # the API server's refusal, as it came
    assert kube.gets == [(PAGE, ""), (f"{ui.PREFIX}/namespaces/team-b/localqueues", "x=1")]
    assert _get(port, "/api/v1/secrets")[0] == 404
    assert _get(port, f"{ui.PREFIX}/../../api/v1/secrets")[0] == 404
    assert _get(port, PAGE, host="evil.example")[0] == 403  # DNS rebinding
    assert len(kube.gets) == 2
