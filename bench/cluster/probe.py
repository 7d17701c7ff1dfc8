"""A webhook probe: once a second, the AdmissionReview the API server would send for a queued Job.

The controller serves its webhooks from the same process (and event loop) as the scheduler, so a
cycle that holds the loop delays every Job create in the cluster. The probe measures that as the
API server sees it: HTTPS to the controller's webhook port, verified against the controller's
own CA, POST `/mutate-job` with a CREATE review for a Job labelled with one of the run's
LocalQueues. Probes are sent on a fixed tick, each on its own, so one slow answer does not delay
the next (the API server does not wait either).

- answered: HTTP 200, a review with our uid, `allowed: true` and a patch that suspends the Job
  (the webhook really decided); its round trip goes into the latency figures;
- refused: anything else the API server would count as a failed call (connection refused or
  reset, TLS failure, another status, `allowed: false`, a malformed answer); with
  `failurePolicy: Fail` each one is a Job create refused;
- timed out: no answer within the webhook configuration's `timeoutSeconds`.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import ssl
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import aiohttp

from bench.cluster.stats import percentile
from queuectl.api import names
from queuectl.webhooks.configs import TIMEOUT_SECONDS


def review(namespace: str, queue: str, uid: str) -> dict[str, Any]:
    """The AdmissionReview v1 the API server sends for `kubectl create` of a queued Job."""
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": "bench-probe",
            "namespace": namespace,
            "labels": {names.LABEL_QUEUE_NAME: queue},
        },
        "spec": {
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [{"name": "main", "image": "bench", "resources": {}}],
                }
            }
        },
    }
    return {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": uid,
            "kind": {"group": "batch", "version": "v1", "kind": "Job"},
            "resource": {"group": "batch", "version": "v1", "resource": "jobs"},
            "requestKind": {"group": "batch", "version": "v1", "kind": "Job"},
            "requestResource": {"group": "batch", "version": "v1", "resource": "jobs"},
            "name": "bench-probe",
            "namespace": namespace,
            "operation": "CREATE",
            "userInfo": {"username": "bench-probe", "groups": ["system:authenticated"]},
            "object": job,
            "oldObject": None,
            "dryRun": True,
            "options": {"apiVersion": "meta.k8s.io/v1", "kind": "CreateOptions"},
        },
    }


def answered(status: int, body: bytes, uid: str) -> bool:
    """True for an answer the API server would apply: ours, allowed, and suspending the Job."""
    if status != 200:
        return False
    try:
        response = json.loads(body).get("response") or {}
    except (ValueError, AttributeError):
        return False
    if response.get("uid") != uid or response.get("allowed") is not True:
        return False
    try:
        patch = json.loads(base64.b64decode(response.get("patch") or ""))
        return any(str(op.get("path")).startswith("/spec") for op in patch)
    except (ValueError, TypeError, AttributeError):
        return False


@dataclass
class ProbeLog:
    """Pure: what the probes got."""

    latencies_ms: list[float] = field(default_factory=list)
    refused: int = 0
    timed_out: int = 0
    errors: list[str] = field(default_factory=list)
    """The first few reasons for refusals, to say why."""

    @property
    def sent(self) -> int:
        return len(self.latencies_ms) + self.refused + self.timed_out

    def refuse(self, why: str) -> None:
        self.refused += 1
        if len(self.errors) < 5:
            self.errors.append(why)

    def summary(self) -> dict[str, Any]:
        lat = self.latencies_ms
        return {
            "sent": self.sent,
            "p50": percentile(lat, 0.50) if lat else None,
            "p99": percentile(lat, 0.99) if lat else None,
            "max": max(lat) if lat else None,
            "refused": self.refused,
            "timed_out": self.timed_out,
            **({"errors": self.errors} if self.errors else {}),
        }


@dataclass(frozen=True)
class Target:
    """Where to probe: the webhook's base URL, the CA that signs it, and the Job's queue."""

    url: str
    ca_file: str
    namespace: str
    queue: str


async def probe_forever(
    target: Target,
    into: ProbeLog,
    every: float = 1.0,
    timeout: float = float(TIMEOUT_SECONDS),
    clock: Callable[[], float] = time.perf_counter,
) -> None:
    """Send one probe every `every` seconds until cancelled; the last probes may still be in
    flight when it is (they are cancelled and not counted)."""
    ctx = ssl.create_default_context(cafile=target.ca_file)
    url = target.url.rstrip("/") + names.WEBHOOK_PATH_MUTATE_JOB
    in_flight: set[asyncio.Task[None]] = set()

    async def one(session: aiohttp.ClientSession) -> None:
        uid = str(uuid.uuid4())
        data = json.dumps(review(target.namespace, target.queue, uid))
        started = clock()
        try:
            async with asyncio.timeout(timeout):
                async with session.post(
                    url, data=data, headers={"Content-Type": "application/json"}, ssl=ctx
                ) as resp:
                    body = await resp.read()
                    status = resp.status
        except TimeoutError:
            into.timed_out += 1
            return
        except (aiohttp.ClientError, OSError) as err:
            into.refuse(f"{type(err).__name__}: {err}"[:200])
            return
        if answered(status, body, uid):
            into.latencies_ms.append((clock() - started) * 1000.0)
        else:
            into.refuse(f"HTTP {status}: {body[:200].decode(errors='replace')}")

    # Keep-alive, as the API server's webhook client does: a probe measures the answer, not a
    # TLS handshake (a fresh connection is made only when the previous one is busy or broken).
    async with aiohttp.ClientSession() as session:
        try:
            next_at = clock()
            while True:
                task = asyncio.create_task(one(session))
                in_flight.add(task)
                task.add_done_callback(in_flight.discard)
                next_at += every
                await asyncio.sleep(max(0.0, next_at - clock()))
        finally:
            for task in in_flight:
                task.cancel()
            await asyncio.gather(*in_flight, return_exceptions=True)


class ProbeThread:
    """The probe on a thread and event loop of its own, so the runner's work on its loop
    (thousands of watch events, timers and requests) does not show up as webhook latency."""

    def __init__(self, target: Target, into: ProbeLog, every: float = 1.0) -> None:
        self.target = target
        self.into = into
        self.every = every
        self.error: BaseException | None = None
        self._started = threading.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._task: asyncio.Task[None] | None = None
        self._thread = threading.Thread(target=self._run, name="webhook-probe", daemon=True)

    def start(self) -> None:
        self._thread.start()
        self._started.wait()

    def _run(self) -> None:
        try:
            asyncio.run(self._main())
        except Exception as err:  # said in the results, not lost with the thread
            self.error = err
            self.into.errors.append(f"the probe stopped: {type(err).__name__}: {err}")
        finally:
            self._started.set()

    async def _main(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._task = asyncio.create_task(probe_forever(self.target, self.into, self.every))
        self._started.set()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task

    def stop(self, timeout: float = 10.0) -> None:
        """Cancel the probes in flight and wait for the thread. What killed the probe early, if
        anything did (a missing CA file, say), is in `error` and in the log's errors: a long
        run's other figures are not thrown away for it."""
        loop, task = self._loop, self._task
        if loop is not None and task is not None and not loop.is_closed():
            with contextlib.suppress(RuntimeError):  # the loop closed meanwhile
                loop.call_soon_threadsafe(task.cancel)
        self._thread.join(timeout)
