"""The agent's HTTP endpoint: /metrics (its own registry), /healthz and /readyz.

/healthz answers 200 whatever NVML says, so a node without a driver does not restart the pod
in a loop; the body names the status. /readyz is 503 until the agent works with NVML.
"""

from __future__ import annotations

from collections.abc import Callable

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from queuectl import metrics

STATUS_OK = "ok"


def make_app(status: Callable[[], str]) -> web.Application:
    async def healthz(_: web.Request) -> web.Response:
        return web.json_response({"status": status()})

    async def readyz(_: web.Request) -> web.Response:
        current = status()
        return web.json_response({"status": current}, status=200 if current == STATUS_OK else 503)

    async def metrics_handler(_: web.Request) -> web.Response:
        body = generate_latest(metrics.AGENT_REGISTRY)
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})

    app = web.Application()
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/readyz", readyz)
    app.router.add_get("/metrics", metrics_handler)
    return app


async def serve(status: Callable[[], str], port: int, host: str = "0.0.0.0") -> web.AppRunner:
    """Start serving; the caller cleans up the returned runner."""
    runner = web.AppRunner(make_app(status), access_log=None)
    await runner.setup()
    await web.TCPSite(runner, host, port).start()
    return runner
