"""`queuectl ui`: the controller's web view on this machine, with your own credentials.

A small local HTTP server that passes GETs under `/apis/visibility.queuectl.io/v1beta1/` to the
API server with the kubeconfig's credentials, as `kubectl proxy` does but for that API only
and read-only: the page and its data come from the controller (controller/webview.py) and
Kubernetes RBAC decides what you see. `/` opens the cluster view when you may read it, else
your namespace's. It listens on 127.0.0.1 and answers only requests addressed to it by that
name (a page elsewhere cannot reach it through DNS rebinding).
"""

from __future__ import annotations

import argparse
import sys
import threading
import webbrowser
from collections.abc import Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING

from queuectl.api import names
from queuectl.cli._common import add_connection_args, connect, guarded, namespace
from queuectl.cli._kube import ApiFailure, CliError, Kube
from queuectl.cli._numbers import PORT

if TYPE_CHECKING:
    from queuectl.cli.main import Subparsers

PREFIX = f"/apis/{names.VISIBILITY_GROUP}/{names.VISIBILITY_VERSION}"
LOCAL_NAMES = ("127.0.0.1", "localhost", "[::1]")


def start_page(kube: Kube, ns: str | None, default_ns: str) -> tuple[str, str | None]:
    """(path of the page to open, a note for the user): the cluster view when the caller may
    list the API's clusterqueues, else the namespace's view."""
    if ns:
        return f"{PREFIX}/namespaces/{ns}/webview", None
    review = {
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SelfSubjectAccessReview",
        "spec": {
            "resourceAttributes": {
                "group": names.VISIBILITY_GROUP,
                "resource": "clusterqueues",
                "verb": "list",
            }
        },
    }
    try:
        answer = kube.request(
            "POST", "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", body=review
        )
        allowed = bool((answer.get("status") or {}).get("allowed"))
    except ApiFailure:
        allowed = False
    if allowed:
        return f"{PREFIX}/webview", None
    note = (
        f"you may not read the cluster view (list clusterqueues in {names.VISIBILITY_GROUP}); "
        f"showing namespace {default_ns} (-n NAMESPACE for another)"
    )
    return f"{PREFIX}/namespaces/{default_ns}/webview", note


def make_server(kube: Kube, address: str, port: int, start: str) -> ThreadingHTTPServer:
    lock = threading.Lock()  # one API client: its calls one at a time

    class Proxy(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: object) -> None:
            pass  # quiet: the page polls

        def _answer(
            self, status: int, content_type: str, body: bytes, extra: Mapping[str, str] = {}
        ) -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            for name, value in extra.items():
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Cache-Control", "no-store")
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self) -> None:
            host = (self.headers.get("Host") or "").rsplit(":", 1)[0]
            if host not in (*LOCAL_NAMES, address):
                self._answer(403, "text/plain", f"not for host {host!r}\n".encode())
                return
            path, _, query = self.path.partition("?")
            if path in ("", "/"):
                self.send_response(302)
                self.send_header("Location", start)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            if not path.startswith(PREFIX + "/") or ".." in path:
                self._answer(404, "text/plain", f"only {PREFIX}/... is served here\n".encode())
                return
            try:
                with lock:
                    status, headers, body = kube.raw_get(path, query)
            except CliError as err:
                self._answer(502, "text/plain", f"{err}\n".encode())
                return
            content_type = headers.pop("Content-Type", "text/plain")
            self._answer(status, content_type, body, headers)

    return ThreadingHTTPServer((address, port), Proxy)


@guarded
def run(args: argparse.Namespace) -> int:
    kube = connect(args)
    if args.as_user:  # what someone else sees (the kubeconfig's user may impersonate)
        kube.api.set_default_header("Impersonate-User", args.as_user)  # type: ignore[no-untyped-call]
    start, note = start_page(kube, args.namespace, namespace(args))
    if note:
        print(f"queuectl: note: {note}", file=sys.stderr)
    try:
        server = make_server(kube, args.address, args.port, start)
    except OSError as err:
        raise CliError(f"cannot listen on {args.address}:{args.port}: {err}; pick --port") from err
    url = f"http://{args.address}:{server.server_address[1]}/"
    print(f"queuectl: the web view is at {url} (Ctrl-C stops it)", flush=True)
    if args.open:
        webbrowser.open(url)
    try:
        server.serve_forever()
    finally:
        server.server_close()
        kube.close()
    return 0


def add_parser(subparsers: Subparsers) -> None:
    p = subparsers.add_parser(
        "ui",
        help="the web view (queues, lines with ETAs, GPU nodes) through a local proxy",
        description="Serve the controller's read-only web view on this machine: a local "
        "server passes the page and its data from the visibility API through with your "
        "kubeconfig's credentials, so you see what your RBAC allows: the whole cluster, or "
        "your namespace's queues.",
    )
    add_connection_args(p)
    p.add_argument("--port", type=PORT, default=8084, help="local port (default 8084; 0: any free)")
    p.add_argument(
        "--address", default="127.0.0.1", help="local address to listen on (default 127.0.0.1)"
    )
    p.add_argument("--open", action="store_true", help="open the page in a browser")
    p.add_argument(
        "--as", dest="as_user", metavar="USER", help="impersonate USER (as kubectl --as)"
    )
    p.set_defaults(func=run)
