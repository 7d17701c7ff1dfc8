"""A steady stream of queued Jobs created through the API server, recording every answer.

The install scenarios (forced certificate renewal, leader failover, rollout restart) change
the controller Deployment while Jobs keep arriving; this creates one labelled Job every
`interval` seconds in a thread, with the Python client (no process per Job), and keeps what the
API server answered: the Job as created (the mutating webhook must have suspended it) or the
refusal. A refusal is what failurePolicy Fail turns an unreachable webhook into.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Any

from kubernetes.client.exceptions import ApiException

from e2e.harness import gpu_job
from queuectl.api import names
from queuectl.testenv.cluster import Cluster
from queuectl.testenv.invariants import request_json


@dataclass
class JobFlow:
    cluster: Cluster
    namespace: str
    queue: str
    prefix: str
    interval: float = 0.5
    created: dict[str, dict[str, Any]] = field(default_factory=dict)
    refused: list[str] = field(default_factory=list)
    created_at: dict[str, float] = field(default_factory=dict)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> JobFlow:
        self._thread = threading.Thread(target=self._run, name=f"jobs-{self.prefix}", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(60)

    def _run(self) -> None:
        api = self.cluster.api_client()
        path = f"/apis/batch/v1/namespaces/{self.namespace}/jobs"
        try:
            n = 0
            while not self._stop.is_set():
                name = f"{self.prefix}-{n:04d}"
                n += 1
                body = gpu_job(name, self.namespace, self.queue, gpus=1, runs_for="1s")
                try:
                    self.created[name] = request_json(api, "POST", path, body)
                    self.created_at[name] = time.monotonic()
                except ApiException as exc:
                    self.refused.append(f"{name}: {exc.status} {exc.reason} {exc.body}")
                except Exception as exc:  # a dropped connection is a refusal too
                    self.refused.append(f"{name}: {exc!r}")
                self._stop.wait(self.interval)
        finally:
            api.close()  # type: ignore[no-untyped-call]

    def not_queued(self) -> list[str]:
        """Jobs the API server created without the mutating webhook's suspend and queue label."""
        bad = []
        for name, job in self.created.items():
            labels = job["metadata"].get("labels") or {}
            if job["spec"].get("suspend") is not True or labels.get(names.LABEL_QUEUE_NAME) != (
                self.queue
            ):
                bad.append(name)
        return bad
