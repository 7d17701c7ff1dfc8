"""What every chaos scenario stands on: controller replicas as real processes (restarted when
they exit, as a kubelet would), a namespace with one ClusterQueue, a steady stream of small GPU
Jobs, and plain REST calls that tell a refusal from an unreachable server."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.request
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException
from urllib3.exceptions import HTTPError

from queuectl.api import names
from queuectl.testenv.controllerargs import controller_args
from queuectl.testenv.invariants import request_json
from queuectl.testenv.nodes import H100
from queuectl.testenv.ports import free_ports

Obj = dict[str, Any]
OURS = f"/apis/{names.API_VERSION}"
FLAVOR = "chaos-h100"


class Rest:
    """JSON over the sync client's connection pool; raises ApiException on a non-2xx answer."""

    def __init__(self, api: k8s.ApiClient) -> None:
        self.api = api

    def call(self, method: str, path: str, body: Any = None, patch: bool = False) -> Obj:
        ctype = "application/merge-patch+json" if patch else "application/json"
        return request_json(self.api, method, path, body, ctype)

    def create(self, path: str, body: Obj) -> Obj:
        return self.call("POST", path, body)

    def apply_all(self, *objs: tuple[str, Obj]) -> None:
        """Create each (collection path, object), tolerating one already there."""
        for path, obj in objs:
            for attempt in range(50):
                try:
                    self.create(path, obj)
                    break
                except ApiException as err:
                    if err.status == 409:
                        break
                    if err.status not in (404, 429, 500, 503) or attempt == 49:
                        raise
                time.sleep(0.2)


# ---- controller replicas -----------------------------------------------------------------------
class Replica:
    """`queuectl controller --leader-elect` against `kubeconfig` (the proxy's, in the suite)."""

    def __init__(self, name: str, kubeconfig: str, log_dir: Path) -> None:
        self.name = name
        self.pod_name = ""
        """POD_NAME, the Lease identity: kept across restarts, as the kubelet restarts a crashed
        container inside its pod; `replace_pod` gives the next start a new one."""
        self.replace_pod()
        self.kubeconfig = kubeconfig
        self.log_dir = log_dir
        self.proc: subprocess.Popen[bytes] | None = None
        self.starts = 0
        self.health_port = self.metrics_port = self.webhook_port = 0

    def replace_pod(self) -> None:
        """The next start is a new pod (its node was lost; the Deployment made another)."""
        self.pod_name = f"{self.name}-{uuid.uuid4().hex[:6]}"

    def start(self, *, wait_leading: bool, timeout: float = 120.0) -> None:
        self.health_port, self.metrics_port, self.webhook_port = free_ports(3)
        self.starts += 1
        log = open(self.log_dir / f"{self.name}-{self.starts}.log", "wb")  # noqa: SIM115
        self.proc = subprocess.Popen(
            [
                sys.executable,
                *controller_args(
                    self.kubeconfig,
                    webhook_port=self.webhook_port,
                    health_port=self.health_port,
                    metrics_port=self.metrics_port,
                    extra=["--leader-elect"],
                ),
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env={**os.environ, "POD_NAME": self.pod_name},
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.name} exited: {self.log_tail()}")
            if self._get("/readyz") == 200 and (not wait_leading or self.leading()):
                return
            time.sleep(0.2)
        self.stop()
        raise RuntimeError(f"{self.name} not ready in {timeout}s: {self.log_tail()}")

    def _get(self, path: str) -> int:
        try:
            url = f"http://127.0.0.1:{self.health_port}{path}"
            with urllib.request.urlopen(url, timeout=2) as r:
                return int(r.status)
        except OSError:
            return 0

    def leading(self) -> bool:
        try:
            url = f"http://127.0.0.1:{self.metrics_port}/metrics"
            with urllib.request.urlopen(url, timeout=2) as r:
                return "queuectl_controller_is_leader 1.0" in r.read().decode()
        except OSError:
            return False

    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def kill(self) -> None:
        """SIGKILL: no Lease release, no cleanup, as a crash."""
        if self.running():
            assert self.proc is not None
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(5)

    def log_tail(self, lines: int = 30) -> str:
        path = self.log_dir / f"{self.name}-{self.starts}.log"
        text = path.read_text(errors="replace").splitlines() if path.exists() else []
        return "\n".join(text[-lines:])


class Kubelet:
    """Restarts a replica that exited on its own (a lost Lease ends the process by design)."""

    def __init__(self, replicas: list[Replica]) -> None:
        self.replicas = replicas
        self.restarts = 0
        self.paused: set[str] = set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="kubelet", daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(1.0):
            for r in self.replicas:
                if r.name not in self.paused and r.proc is not None and not r.running():
                    self.restarts += 1
                    with contextlib.suppress(RuntimeError):  # tried again next round
                        r.start(wait_leading=False)

    def start(self) -> Kubelet:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(150)


# ---- one namespace, one queue, a stream of Jobs -------------------------------------------------
@dataclass(frozen=True)
class Queue:
    namespace: str
    cluster_queue: str
    local_queue: str = "lq"


def make_queue(rest: Rest, namespace: str, gpus: int, *, name: str | None = None) -> Queue:
    """A namespace and a ClusterQueue of `gpus` H100 GPUs for it alone, with LocalQueue `lq`."""
    cq = name or f"cq-{namespace}"
    rest.apply_all(
        ("/api/v1/namespaces", {"metadata": {"name": namespace}}),
        (
            f"{OURS}/resourceflavors",
            {
                "apiVersion": names.API_VERSION,
                "kind": "ResourceFlavor",
                "metadata": {"name": FLAVOR},
                "spec": {"nodeLabels": {names.LABEL_GPU_PRODUCT: H100}},
            },
        ),
    )
    add_cluster_queue(rest, namespace, cq, gpus, "lq")
    wait_service_account(rest, namespace)
    return Queue(namespace, cq)


def add_cluster_queue(rest: Rest, namespace: str, cq: str, gpus: int, lq: str) -> None:
    gpu = {"name": names.GPU_RESOURCE, "nominalQuota": gpus}
    rest.apply_all(
        (
            f"{OURS}/clusterqueues",
            {
                "apiVersion": names.API_VERSION,
                "kind": "ClusterQueue",
                "metadata": {"name": cq},
                "spec": {
                    "namespaceSelector": {
                        "matchLabels": {"kubernetes.io/metadata.name": namespace}
                    },
                    "resourceGroups": [
                        {
                            "coveredResources": [names.GPU_RESOURCE],
                            "flavors": [{"name": FLAVOR, "resources": [gpu]}],
                        }
                    ],
                },
            },
        ),
        (
            f"{OURS}/namespaces/{namespace}/localqueues",
            {
                "apiVersion": names.API_VERSION,
                "kind": "LocalQueue",
                "metadata": {"name": lq, "namespace": namespace},
                "spec": {"clusterQueue": cq},
            },
        ),
    )


def wait_service_account(rest: Rest, namespace: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            rest.call("GET", f"/api/v1/namespaces/{namespace}/serviceaccounts/default")
            return
        except ApiException:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def job(
    name: str,
    namespace: str,
    queue: str,
    *,
    gpus: int = 2,
    parallelism: int = 1,
    completions: int = 1,
    runs_for: str = "2s",
    labels: dict[str, str] | None = None,
) -> Obj:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {names.LABEL_QUEUE_NAME: queue, **(labels or {})},
        },
        "spec": {
            "parallelism": parallelism,
            "completions": completions,
            "backoffLimit": 0,
            "template": {
                "metadata": {"annotations": {names.ANNOTATION_TESTENV_SUCCEED_AFTER: runs_for}},
                "spec": {
                    "restartPolicy": "Never",
                    "terminationGracePeriodSeconds": 0,
                    "containers": [
                        {
                            "name": "main",
                            "image": "registry.k8s.io/pause:3.10",
                            "resources": {
                                "requests": {names.GPU_RESOURCE: str(gpus)},
                                "limits": {names.GPU_RESOURCE: str(gpus)},
                            },
                        }
                    ],
                },
            },
        },
    }


def status_message(err: ApiException) -> str:
    """The API server's own words from a refusal (its Status message), else the reason."""
    try:
        status = json.loads(err.body or "")
    except ValueError:
        return str(err.body or err.reason)[:400]
    return str(status.get("message") if isinstance(status, dict) else status)[:400]


@dataclass
class Refusal:
    at: float
    status: int
    reason: str


@dataclass
class JobStream:
    """Creates a small GPU Job every `interval` seconds until stopped.

    A create the API server answers with an error is a refusal (e.g. a webhook that did not
    answer); one that never reached an answering server (it was restarting) is only counted.
    """

    rest: Rest
    queue: Queue
    interval: float = 1.0
    runs_for: str = "2s"
    created: list[str] = field(default_factory=list)
    refused: list[Refusal] = field(default_factory=list)
    unreachable: int = 0

    def __post_init__(self) -> None:
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="job-stream", daemon=True)

    def _run(self) -> None:
        i = 0
        while not self._stop.is_set():
            name = f"s-{i:04d}"
            body = job(name, self.queue.namespace, self.queue.local_queue, runs_for=self.runs_for)
            try:
                self.rest.create(f"/apis/batch/v1/namespaces/{self.queue.namespace}/jobs", body)
                self.created.append(name)
                i += 1
            except ApiException as err:
                if err.status == 0:
                    self.unreachable += 1
                else:
                    message = status_message(err)
                    self.refused.append(Refusal(time.monotonic(), int(err.status), message))
                    i += 1  # a refused name is not reused: it may exist after all
            except (HTTPError, OSError):
                self.unreachable += 1
            self._stop.wait(self.interval)

    def start(self) -> JobStream:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(60)


def unfinished_jobs(rest: Rest, namespace: str, names_: list[str]) -> list[str]:
    """Those of `names_` whose Job has not completed (or is gone)."""
    found = rest.call("GET", f"/apis/batch/v1/namespaces/{namespace}/jobs")["items"]
    complete = {
        j["metadata"]["name"]
        for j in found
        for c in (j.get("status") or {}).get("conditions") or []
        if c.get("type") == "Complete" and c.get("status") == "True"
    }
    return [n for n in names_ if n not in complete]
