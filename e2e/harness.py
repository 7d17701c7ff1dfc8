"""What the controller's integration and e2e tests share: the controller as a real process,
and small helpers to create objects and wait for the cluster to reach a state.

The controller runs as `queuectl controller --kubeconfig ...`, exactly as a user runs it
out-of-cluster: it installs the CRDs, registers its webhooks at https://127.0.0.1:PORT and serves
them. One process per test module (`controller` fixture); scenario 8 kills and restarts it.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
import yaml

from queuectl.api import names
from queuectl.convert import parse_time
from queuectl.testenv.cluster import Cluster
from queuectl.testenv.controllerargs import controller_args
from queuectl.testenv.nodes import H100
from queuectl.testenv.ports import free_ports

WL = "workloads.queuectl.io"


class ControllerProcess:
    """`queuectl controller` against a cluster, started and stopped by the tests."""

    def __init__(self, kubeconfig: str, log_dir: Path, extra_args: Sequence[str] = ()) -> None:
        self.kubeconfig = kubeconfig
        self.log_dir = log_dir
        self.extra_args = list(extra_args)
        self.proc: subprocess.Popen[bytes] | None = None
        self.starts = 0
        self.health_port = self.metrics_port = self.webhook_port = 0

    def start(self, timeout: float = 60.0) -> None:
        self.health_port, self.metrics_port, self.webhook_port = free_ports(3)
        self.starts += 1
        log = open(self.log_dir / f"controller-{self.starts}.log", "wb")  # noqa: SIM115
        self.proc = subprocess.Popen(
            [
                sys.executable,
                *controller_args(
                    self.kubeconfig,
                    webhook_port=self.webhook_port,
                    health_port=self.health_port,
                    metrics_port=self.metrics_port,
                    extra=["--leader-elect", *self.extra_args],
                ),
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"controller exited: {self.log_tail()}")
            if self._get("/readyz", self.health_port) == 200 and self.leading():
                return
            time.sleep(0.2)
        self.stop()  # never leave a process behind that would hold or contend for the Lease
        raise RuntimeError(f"controller not ready in {timeout}s: {self.log_tail()}")

    def _get(self, path: str, port: int) -> int:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=2) as r:
                return int(r.status)
        except OSError:
            return 0

    def metrics(self) -> str:
        url = f"http://127.0.0.1:{self.metrics_port}/metrics"
        with urllib.request.urlopen(url, timeout=5) as r:
            return str(r.read().decode())

    def leading(self) -> bool:
        try:
            return "queuectl_controller_is_leader 1.0" in self.metrics()
        except OSError:
            return False

    def kill(self) -> None:
        """SIGKILL: no lease release, no cleanup, as a crash."""
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

    def log_tail(self, lines: int = 40) -> str:
        path = self.log_dir / f"controller-{self.starts}.log"
        text = path.read_text(errors="replace").splitlines() if path.exists() else []
        return "\n".join(text[-lines:])


@contextlib.contextmanager
def running_controller(
    control_plane: Cluster, log_dir: Path, extra_args: Sequence[str] = ()
) -> Iterator[ControllerProcess]:
    """A controller with `extra_args`, stopped at the end with its webhook configurations
    deleted: a stopped out-of-cluster controller leaves Fail-policy webhooks pointing at a dead
    port (by design: nobody bypasses the queue while it is down), and later modules that install
    their own webhooks or apply the kustomize base must not meet them."""
    proc = ControllerProcess(control_plane.kubeconfig, log_dir, extra_args)
    proc.start()
    try:
        yield proc
    finally:
        proc.stop()
        unregister_webhooks(control_plane)


@pytest.fixture(scope="module")
def controller(
    control_plane: Cluster, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ControllerProcess]:
    """A controller for one test module (a module that needs flags overrides this fixture
    with `running_controller`)."""
    with running_controller(control_plane, tmp_path_factory.mktemp("controller")) as proc:
        yield proc


def unregister_webhooks(cluster: Cluster) -> None:
    cluster.kubectl(
        "delete",
        "--ignore-not-found",
        f"mutatingwebhookconfiguration/{names.MUTATING_WEBHOOK_CONFIGURATION}",
        f"validatingwebhookconfiguration/{names.VALIDATING_WEBHOOK_CONFIGURATION}",
    )


# --- objects ---------------------------------------------------------------------------------
def apply(cluster: Cluster, *objs: dict[str, Any]) -> None:
    cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump_all(objs))


def get(cluster: Cluster, kind: str, name: str, namespace: str | None = None) -> dict[str, Any]:
    args = ["get", kind, name, "-o", "json"] + (["-n", namespace] if namespace else [])
    out: dict[str, Any] = json.loads(cluster.kubectl(*args).stdout)
    return out


def items(cluster: Cluster, kind: str, namespace: str, *selector: str) -> list[dict[str, Any]]:
    out = cluster.kubectl("get", kind, "-n", namespace, "-o", "json", *selector).stdout
    found: list[dict[str, Any]] = json.loads(out)["items"]
    return found


def topology(name: str, *levels: str) -> dict[str, Any]:
    """A Topology over node labels, coarsest level first."""
    return {
        "apiVersion": names.API_VERSION,
        "kind": "Topology",
        "metadata": {"name": name},
        "spec": {"levels": [{"nodeLabel": level} for level in levels]},
    }


def flavor(name: str, product: str, topology: str | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"nodeLabels": {names.LABEL_GPU_PRODUCT: product}}
    if topology:
        spec["topologyName"] = topology
    return {
        "apiVersion": names.API_VERSION,
        "kind": "ResourceFlavor",
        "metadata": {"name": name},
        "spec": spec,
    }


def cluster_queue(
    name: str, namespace: str, gpus: dict[str, int | dict[str, Any]], **spec: Any
) -> dict[str, Any]:
    """A ClusterQueue over nvidia.com/gpu only, selecting just `namespace` (tests stay apart).
    `gpus` maps flavor -> nominal quota (or a full resource quota dict)."""
    flavors = []
    for fl, quota in gpus.items():
        res = quota if isinstance(quota, dict) else {"nominalQuota": quota}
        flavors.append({"name": fl, "resources": [{"name": names.GPU_RESOURCE, **res}]})
    return {
        "apiVersion": names.API_VERSION,
        "kind": "ClusterQueue",
        "metadata": {"name": name},
        "spec": {
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}},
            "resourceGroups": [{"coveredResources": [names.GPU_RESOURCE], "flavors": flavors}],
            **spec,
        },
    }


def local_queue(name: str, namespace: str, cq: str) -> dict[str, Any]:
    return {
        "apiVersion": names.API_VERSION,
        "kind": "LocalQueue",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"clusterQueue": cq},
    }


def one_queue(cluster: Cluster, namespace: str, gpus: int) -> str:
    """The smallest setup: an H100 flavor, a ClusterQueue of `gpus` for this namespace, and
    LocalQueue `lq` in it. Returns the ClusterQueue's name."""
    cq = f"cq-{namespace}"
    apply(
        cluster,
        flavor("h100", H100),
        cluster_queue(cq, namespace, {"h100": gpus}),
        local_queue("lq", namespace, cq),
    )
    return cq


POOL = "e2e.queuectl.io/pool"


def pool_taint(name: str) -> dict[str, str]:
    """The taint on a module's own nodes (labelled `POOL: name`): the control plane is shared by
    the whole session, and only flavors made `in_pool(.., name)` reach them."""
    return {"key": POOL, "value": name, "effect": "NoSchedule"}


def in_pool(fl: dict[str, Any], name: str) -> dict[str, Any]:
    """Flavor `fl` kept to pool `name`: its label selects the pool's nodes and its toleration
    lets the admitted pods onto them."""
    fl["spec"]["nodeLabels"][POOL] = name
    fl["spec"]["tolerations"] = [{**pool_taint(name), "operator": "Equal"}]
    return fl


def rack_pool(cluster: Cluster, namespace: str, prefix: str, gpus: int) -> None:
    """Two racks of four 8-GPU H100 nodes of the test's own (the standard fleet's racks hold
    two nodes each: too few for a 4 x 8 GPU gang in one rack), a flavor over just them with a
    block/rack/host Topology, a ClusterQueue of `gpus` for `namespace` and LocalQueue `lq`.
    The nodes are tainted and only this flavor tolerates them: the session's control plane is
    shared, and untainted they were free H100s for every later module's H100 flavor (a
    PyTorchJob's master landed in an LWS test's leftover block, its workers in another)."""
    cluster.add_gpu_nodes(
        8, racks_per_block=2, name_prefix=prefix, labels={POOL: prefix}, taints=[pool_taint(prefix)]
    )
    topo, cq = f"topo-{namespace}", f"cq-{namespace}"
    pool = in_pool(flavor(prefix, H100, topology=topo), prefix)
    apply(
        cluster,
        topology(topo, names.LABEL_TOPOLOGY_BLOCK, names.LABEL_TOPOLOGY_RACK, names.LABEL_HOSTNAME),
        pool,
        cluster_queue(cq, namespace, {prefix: gpus}),
        local_queue("lq", namespace, cq),
    )


def priority_class(name: str, value: int, grace: int = 0) -> dict[str, Any]:
    return {
        "apiVersion": names.API_VERSION,
        "kind": "WorkloadPriorityClass",
        "metadata": {"name": name},
        "value": value,
        "preemptionGracePeriodSeconds": grace,
    }


def low_and_high(cluster: Cluster, namespace: str, grace: int) -> tuple[str, str]:
    """A preemption scenario's two WorkloadPriorityClasses: low-NS (10, `grace` seconds of
    notice) and high-NS (1000). Returns their names."""
    low, high = f"low-{namespace}", f"high-{namespace}"
    apply(cluster, priority_class(low, 10, grace=grace), priority_class(high, 1000))
    return low, high


def notice_and_deadline(
    workload: Callable[[], dict[str, Any] | None], job: Callable[[], dict[str, Any]], what: str
) -> tuple[dict[str, Any], float, float]:
    """A victim's notice: its Workload Preempted, then the deadline annotation on its job
    (`what` names the job in messages). Returns (the Workload, when the notice was seen, the
    deadline)."""
    wl = wait_for(
        "victim noticed",
        lambda: (w := workload()) and is_true(w, names.COND_PREEMPTED) and w,
    )
    noticed = time.time()
    stamp = wait_for(
        f"the deadline on the {what}",
        lambda: (job()["metadata"].get("annotations") or {}).get(
            names.ANNOTATION_PREEMPTION_DEADLINE
        ),
    )
    deadline = parse_time(stamp)
    assert deadline is not None, stamp
    return wl, noticed, deadline


def gpu_job(
    name: str,
    namespace: str,
    queue: str,
    *,
    pods: int = 1,
    gpus: int = 8,
    priority: str | None = None,
    runs_for: str | None = None,
    annotations: dict[str, str] | None = None,
) -> dict[str, Any]:
    """A Job of `pods` pods of `gpus` GPUs each; it runs until deleted unless `runs_for`."""
    labels = {names.LABEL_QUEUE_NAME: queue}
    if priority:
        labels[names.LABEL_PRIORITY_CLASS] = priority
    pod_annotations = dict(annotations or {})
    if runs_for:
        pod_annotations[names.ANNOTATION_TESTENV_SUCCEED_AFTER] = runs_for
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": namespace, "labels": labels},
        "spec": {
            "parallelism": pods,
            "completions": pods,
            "backoffLimit": 0,
            "template": {
                "metadata": {"annotations": pod_annotations},
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


def workload_of(cluster: Cluster, namespace: str, job: str) -> dict[str, Any] | None:
    for wl in items(cluster, WL, namespace):
        refs = wl["metadata"].get("ownerReferences") or []
        if any(r.get("kind") == "Job" and r.get("name") == job for r in refs):
            return wl
    return None


def condition(obj: dict[str, Any], type_: str) -> dict[str, Any] | None:
    for c in (obj.get("status") or {}).get("conditions") or []:
        if c.get("type") == type_:
            return dict(c)
    return None


def is_true(obj: dict[str, Any] | None, type_: str) -> bool:
    c = condition(obj or {}, type_)
    return c is not None and c.get("status") == "True"


def admitted(cluster: Cluster, namespace: str, job: str) -> bool:
    wl = workload_of(cluster, namespace, job)
    return (
        wl is not None and is_true(wl, names.COND_ADMITTED) and not is_true(wl, names.COND_FINISHED)
    )


def pods_of(cluster: Cluster, namespace: str, job: str) -> list[dict[str, Any]]:
    return items(cluster, "pods", namespace, "-l", f"job-name={job}")


def running_pods(cluster: Cluster, namespace: str, job: str) -> list[dict[str, Any]]:
    return [
        p
        for p in pods_of(cluster, namespace, job)
        if (p.get("status") or {}).get("phase") == "Running"
        and not p["metadata"].get("deletionTimestamp")
    ]


def wait_for(
    what: str, probe: Callable[[], Any], timeout: float = 60.0, interval: float = 0.3
) -> Any:
    """Poll until `probe` returns something truthy; fail with `what` otherwise."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        last = probe()
        if last:
            return last
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {what} (last: {last!r})")


def wait_for_pending_reason(
    cluster: Cluster, namespace: str, job: str, reason: str, timeout: float = 60.0
) -> tuple[dict[str, Any], str]:
    """Wait until the job's Workload waits with `reason`; (the Workload, its message)."""

    def probe() -> tuple[dict[str, Any], str] | None:
        wl = workload_of(cluster, namespace, job)
        cond = condition(wl or {}, names.COND_QUOTA_RESERVED) or {}
        if wl is None or cond.get("reason") != reason:
            return None
        return wl, str(cond.get("message") or "")

    found: tuple[dict[str, Any], str] = wait_for(f"{job} waiting with {reason}", probe, timeout)
    return found
