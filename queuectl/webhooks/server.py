"""The HTTPS admission server: routes AdmissionReviews to the pure decisions.

Hostile or broken input never reaches a decision: a body that is not a well-formed AdmissionReview
v1 gets HTTP 400 with the reason, one over MAX_BODY_BYTES 413, one not fully sent within
BODY_READ_TIMEOUT 408; a review whose object has a field of the wrong type where the route's
decision reads it (`wellformed`: only a review sent by hand can) is denied naming the field.
A decision that raises is logged, counted and answered as its route's failure policy says
(`OnError`), so an internal error in the fail-open route cannot refuse every Job in the cluster.
The controller embeds it with `start_webhook_server` and shares its cache through the lookup.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Awaitable, Callable, Collection
from enum import Enum
from typing import Any

from aiohttp import web

from queuectl import metrics
from queuectl.api import names
from queuectl.jobs.registry import KINDS, Registry
from queuectl.webhooks import wellformed
from queuectl.webhooks.jobs import mutate_job, read_inputs, validate_job
from queuectl.webhooks.lookup import QueueLookup
from queuectl.webhooks.owned import read_owner
from queuectl.webhooks.pinned import mutate_pinned_pod
from queuectl.webhooks.pods import mutate_lws, mutate_pod, validate_pod
from queuectl.webhooks.resources import validate_queuectl
from queuectl.webhooks.review import (
    DEFAULT_CONTROLLER_USERS,
    MalformedReview,
    Request,
    Response,
    allow,
    deny,
    parse_review,
    review,
)
from queuectl.webhooks.scale import read_job, validate_scale
from queuectl.webhooks.tls import ReloadingTLS
from queuectl.webhooks.workloads import validate_workload

log = logging.getLogger(__name__)

Decision = Callable[[Request], Response]
Prepare = Callable[[Request], Awaitable[None]]
"""Awaited before a route's decision: reads what the decision needs that the cache may lack."""
MAX_BODY_BYTES = 8 * 1024 * 1024  # a Job with a large template still fits; a flood does not
BODY_READ_TIMEOUT = 10.0  # seconds for the whole body; the API server's own call timeout is 5 s
LINGERING_TIME = 1.0  # seconds a connection is drained after its answer before it is closed
TLS_KEY: web.AppKey[ReloadingTLS] = web.AppKey("tls", ReloadingTLS)
INTERNAL_ERROR = "queuectl webhook failed internally; see the controller's log"


class OnError(Enum):
    """What a decision that raised answers: the same as the route's failurePolicy would."""

    ALLOW = "allowed"
    DENY = "denied"


def _rejected(route: str, reason: str, status: int, message: str) -> web.Response:
    metrics.WEBHOOK_REJECTED_REQUESTS.labels(route=route, reason=reason).inc()
    return web.json_response({"error": message}, status=status, reason="Bad AdmissionReview")


async def _read_body(http: web.Request, route: str, timeout: float) -> bytes | web.Response:
    """The whole body, or the HTTP error that answers it (slow, too large, cut off)."""
    try:
        async with asyncio.timeout(timeout):
            return await http.read()
    except TimeoutError:
        message = f"request body not received within {timeout:g} s"
        return _rejected(route, "read_timeout", 408, message)
    except web.HTTPRequestEntityTooLarge:
        message = f"request body is larger than {MAX_BODY_BYTES} bytes"
        return _rejected(route, "too_large", 413, message)
    except (ConnectionError, asyncio.IncompleteReadError, OSError) as exc:
        return _rejected(route, "disconnected", 400, f"request body cut off: {exc}")


def _handler(
    route: str,
    decide: Decision,
    on_error: OnError,
    read_timeout: float,
    prepare: Prepare | None = None,
    kinds: Registry = KINDS,
) -> Callable[[web.Request], Any]:
    async def handle(http: web.Request) -> web.Response:
        body = await _read_body(http, route, read_timeout)
        if isinstance(body, web.Response):
            return body
        try:
            request = parse_review(body)
        except MalformedReview as exc:
            return _rejected(route, "malformed", 400, str(exc))
        ill_typed = wellformed.problem(route, request, kinds)
        if ill_typed is not None:
            return web.json_response(review(deny(request, ill_typed, code=422)))
        try:
            if prepare is not None:
                await prepare(request)
            response = decide(request)
        except Exception:
            log.exception(
                "admission decision failed on %s for %s; answered %s",
                route,
                request["uid"],
                on_error.value,
            )
            metrics.WEBHOOK_INTERNAL_ERRORS.labels(route=route, answer=on_error.value).inc()
            if on_error is OnError.ALLOW:
                response = allow(request, warnings=[f"{INTERNAL_ERROR}; allowed unchecked"])
            else:
                response = deny(request, INTERNAL_ERROR, code=500)
        return web.json_response(review(response))

    return handle


async def _healthz(_: web.Request) -> web.Response:
    return web.Response(text="ok")


JOB_ROUTES = frozenset(
    {
        names.WEBHOOK_PATH_MUTATE_JOB,
        names.WEBHOOK_PATH_MUTATE_UNLABELLED_JOB,
        names.WEBHOOK_PATH_VALIDATE_JOB,
        names.WEBHOOK_PATH_VALIDATE_OWNED_JOB,
    }
)
"""The routes that serve every job kind (and await `read_inputs` before deciding)."""


def decisions(
    lookup: QueueLookup,
    controller_users: Collection[str] = DEFAULT_CONTROLLER_USERS,
    kinds: Registry = KINDS,
    kueue_queue_label: bool = False,
) -> list[tuple[str, Decision, OnError]]:
    """Each route with its decision and what a decision that raises answers.

    Each route's OnError matches its webhook's failurePolicy in `configs`: the unlabelled-Job
    mutation sees every Job create in the cluster and fails open, and so does the owned-job
    validation (every controlled object's write); the rest fail closed. The
    job routes serve every kind in `kinds` (the AdmissionReview names which).
    `kueue_queue_label`: the job routes read Kueue's queue label too (webhooks/kueue_label.py).
    """
    users = frozenset(controller_users)
    kueue = kueue_queue_label
    return [
        (
            names.WEBHOOK_PATH_MUTATE_JOB,
            lambda r: mutate_job(r, lookup, kinds, kueue_queue_label=kueue),
            OnError.DENY,
        ),
        (
            names.WEBHOOK_PATH_MUTATE_UNLABELLED_JOB,
            lambda r: mutate_job(r, lookup, kinds, kueue_queue_label=kueue),
            OnError.ALLOW,
        ),
        (
            names.WEBHOOK_PATH_VALIDATE_JOB,
            lambda r: validate_job(r, lookup, users, kinds, kueue_queue_label=kueue),
            OnError.DENY,
        ),
        (
            names.WEBHOOK_PATH_VALIDATE_OWNED_JOB,
            lambda r: validate_job(r, lookup, users, kinds, children_only=True),
            OnError.ALLOW,
        ),
        (
            names.WEBHOOK_PATH_VALIDATE_QUEUECTL,
            lambda r: validate_queuectl(r, lookup),
            OnError.DENY,
        ),
        (names.WEBHOOK_PATH_VALIDATE_WORKLOAD, lambda r: validate_workload(r, users), OnError.DENY),
        (names.WEBHOOK_PATH_MUTATE_POD, lambda r: mutate_pod(r, lookup, kinds), OnError.DENY),
        (names.WEBHOOK_PATH_MUTATE_LWS, mutate_lws, OnError.DENY),
        (
            names.WEBHOOK_PATH_MUTATE_PINNED_POD,
            lambda r: mutate_pinned_pod(r, lookup, kinds),
            OnError.DENY,
        ),
        (
            names.WEBHOOK_PATH_VALIDATE_POD,
            lambda r: validate_pod(r, lookup, users, kinds),
            OnError.DENY,
        ),
        (
            names.WEBHOOK_PATH_VALIDATE_SCALE,
            lambda r: validate_scale(r, lookup, users, kinds),
            OnError.DENY,
        ),
    ]


def make_app(
    lookup: QueueLookup,
    controller_users: Collection[str] = DEFAULT_CONTROLLER_USERS,
    read_timeout: float = BODY_READ_TIMEOUT,
    kinds: Registry = KINDS,
    kueue_queue_label: bool = False,
) -> web.Application:
    """The routes (`decisions`), without TLS: what the unit tests drive through aiohttp's
    test client."""

    async def prepare_job(request: Request) -> None:
        await read_inputs(request, lookup, kinds)

    async def prepare_pod(request: Request) -> None:
        await read_owner(request, lookup, kinds)

    async def prepare_scale(request: Request) -> None:
        await read_job(request, lookup, kinds)

    app = web.Application(client_max_size=MAX_BODY_BYTES)
    routes = decisions(lookup, controller_users, kinds, kueue_queue_label)
    for path, decide, on_error in routes:
        prepare = prepare_job if path in JOB_ROUTES else None
        if path == names.WEBHOOK_PATH_VALIDATE_POD:
            prepare = prepare_pod
        if path == names.WEBHOOK_PATH_VALIDATE_SCALE:
            prepare = prepare_scale
        handler = _handler(path, decide, on_error, read_timeout, prepare, kinds)
        app.router.add_post(path, handler)
    app.router.add_get(names.WEBHOOK_PATH_HEALTHZ, _healthz)
    return app


async def start_webhook_server(
    host: str,
    port: int,
    cert_dir: str | os.PathLike[str],
    lookup: QueueLookup,
    controller_users: Collection[str] = DEFAULT_CONTROLLER_USERS,
    min_cert_check_interval: float = 1.0,
    read_timeout: float = BODY_READ_TIMEOUT,
    kinds: Registry = KINDS,
    kueue_queue_label: bool = False,
) -> web.AppRunner:
    """Serve the webhooks over HTTPS from cert_dir/tls.crt and tls.key until runner.cleanup().

    Certificate files replaced in place are picked up by new connections (checked at most every
    min_cert_check_interval seconds). Port 0 picks a free port: read it with `bound_port(runner)`.
    """
    tls = ReloadingTLS(cert_dir, min_check_interval=min_cert_check_interval)
    app = make_app(lookup, controller_users, read_timeout, kinds, kueue_queue_label)
    app[TLS_KEY] = tls
    # lingering_time: after answering a request whose body never fully came (408), aiohttp
    # would keep reading the rest for 10 s before closing; one second is plenty for a real client.
    runner = web.AppRunner(app, access_log=None, lingering_time=LINGERING_TIME)
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
