"""One answer to "is this API trouble that a retry may cure?", for every loop that talks to the
API server: the leader elector, the controller's workers and watchers, the certificate loop.

It lives here, below the controller and the webhooks, because both ask it. A transport error
(dropped or refused connection, reset, timeout, a body cut short) and the server's own 5xx,
429 (throttled) and 408 answers are transient: the loop logs, backs off and tries again. Any
other HTTP answer is the server's considered "no" and the caller decides what it means.
"""

from __future__ import annotations

import asyncio

import aiohttp

_TRANSIENT_STATUS = frozenset({408, 429})


def is_transient(err: BaseException) -> bool:
    """True for transport failures and for 5xx/429/408 answers, whatever client raised them.

    HTTP errors are recognised by an integer `status` attribute (the controller's `KubeError`,
    kubernetes_asyncio's `ApiException`, aiohttp's `ClientResponseError`), so this module needs
    neither of their modules. `OSError` covers `TimeoutError` (= `asyncio.TimeoutError`),
    connection resets and TLS failures; aiohttp's `ServerDisconnectedError` is not an OSError.
    """
    if isinstance(
        err,
        aiohttp.ClientConnectionError
        | aiohttp.ClientPayloadError
        | asyncio.IncompleteReadError
        | OSError,
    ):
        return True
    status = getattr(err, "status", None)
    return isinstance(status, int) and (status >= 500 or status in _TRANSIENT_STATUS)
