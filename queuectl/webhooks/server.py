"""The HTTPS admission server: routes AdmissionReviews to the pure decisions.

A body that is not a well-formed AdmissionReview v1 gets HTTP 400 with the reason; a decision that
raises is logged and answered with allowed=false (code 500), so the server itself never falls over.
The controller embeds it with `start_webhook_server` and shares its cache through the lookup.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Collection
from typing import Any

from aiohttp import web

from queuectl.api import names
from queuectl.webhooks.jobs import DEFAULT_CONTROLLER_USERS, mutate_job, validate_job
from queuectl.webhooks.lookup import QueueLookup
from queuectl.webhooks.resources import validate_queuectl
from queuectl.webhooks.review import MalformedReview, Request, Response, deny, parse_review, review
from queuectl.webhooks.tls import ReloadingTLS

log = logging.getLogger(__name__)

Decision = Callable[[Request], Response]
MAX_BODY_BYTES = 8 * 1024 * 1024  # a Job with a large template still fits; a flood does not
TLS_KEY: web.AppKey[ReloadingTLS] = web.AppKey("tls", ReloadingTLS)


def _handler(decide: Decision) -> Callable[[web.Request], Any]:
    async def handle(http: web.Request) -> web.Response:
        try:
            request = parse_review(await http.read())
        except MalformedReview as exc:
            return web.json_response({"error": str(exc)}, status=400, reason="Bad AdmissionReview")
        try:
            response = decide(request)
        except Exception:
            log.exception("admission decision failed for %s", request.get("uid"))
            response = deny(
                request, "queuectl webhook failed internally; see the controller's log", code=500
            )
        return web.json_response(review(response))

    return handle


async def _healthz(_: web.Request) -> web.Response:
    return web.Response(text="ok")


def make_app(
    lookup: QueueLookup, controller_users: Collection[str] = DEFAULT_CONTROLLER_USERS
) -> web.Application:
    """The routes, without TLS: what the unit tests drive through aiohttp's test client."""
    users = frozenset(controller_users)
    app = web.Application(client_max_size=MAX_BODY_BYTES)
    app.router.add_post(names.WEBHOOK_PATH_MUTATE_JOB, _handler(lambda r: mutate_job(r, lookup)))
    app.router.add_post(
        names.WEBHOOK_PATH_VALIDATE_JOB, _handler(lambda r: validate_job(r, lookup, users))
    )
    app.router.add_post(
        names.WEBHOOK_PATH_VALIDATE_QUEUECTL, _handler(lambda r: validate_queuectl(r, lookup))
    )
    app.router.add_get(names.WEBHOOK_PATH_HEALTHZ, _healthz)
    return app


async def start_webhook_server(
    host: str,
    port: int,
    cert_dir: str | os.PathLike[str],
    lookup: QueueLookup,
    controller_users: Collection[str] = DEFAULT_CONTROLLER_USERS,
    min_cert_check_interval: float = 1.0,
) -> web.AppRunner:
    """Serve the webhooks over HTTPS from cert_dir/tls.crt and tls.key until runner.cleanup().

    Certificate files replaced in place are picked up by new connections (checked at most every
    min_cert_check_interval seconds). Port 0 picks a free port: read it with `bound_port(runner)`.
    """
    tls = ReloadingTLS(cert_dir, min_check_interval=min_cert_check_interval)
    app = make_app(lookup, controller_users)
    app[TLS_KEY] = tls
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, host, port, ssl_context=tls.base)
    await site.start()
    log.info("webhooks listening on https://%s:%d", host, bound_port(runner))
    return runner


def bound_port(runner: web.AppRunner) -> int:
    """The port the first listening socket is bound to."""
    for address in runner.addresses:
        if isinstance(address, tuple):
            return int(address[1])
    raise RuntimeError("the webhook server is not listening")


def reloading_tls(runner: web.AppRunner) -> ReloadingTLS:
    """The TLS holder of a running server (to force a check, or to count reloads)."""
    assert runner.app is not None
    return runner.app[TLS_KEY]
