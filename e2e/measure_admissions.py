"""Admissions per second the controller sustains on the local control plane (a figure, not a test).

    QUEUECTL_KUBECONFIG=... python -m e2e.measure_admissions [N] [--jobs]

With --jobs it submits one-pod Jobs instead and waits until every Job is unsuspended (Job ->
Workload -> admission -> start: two writes per job).

Starts `queuectl controller`, creates N Workloads directly (1 pod x 1 GPU each) in a fresh
namespace behind a held ClusterQueue (stopPolicy Hold) large enough for all of them, then
releases the queue and reports the time until every Workload carries its admission: the
controller's own rate (one cycle plus one conditional status write per workload), not the
rate at which kubectl can create objects.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import yaml

from e2e.harness import ControllerProcess, apply, cluster_queue, flavor, local_queue
from queuectl.api import names
from queuectl.testenv.cluster import Cluster
from queuectl.testenv.nodes import H100


def job(i: int, ns: str) -> dict[str, Any]:
    """A one-pod, one-GPU Job, as a user submits it."""
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": f"j-{i}", "namespace": ns, "labels": {names.LABEL_QUEUE_NAME: "lq"}},
        "spec": {
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [
                        {
                            "name": "c",
                            "image": "x",
                            "resources": {
                                "requests": {names.GPU_RESOURCE: "1"},
                                "limits": {names.GPU_RESOURCE: "1"},
                            },
                        }
                    ],
                }
            }
        },
    }


def main(n: int, jobs: bool) -> None:
    cluster = Cluster(os.environ["QUEUECTL_KUBECONFIG"])
    ns = f"measure-{uuid.uuid4().hex[:6]}"
    cluster.kubectl("create", "namespace", ns)
    proc = ControllerProcess(cluster.kubeconfig, Path(tempfile.mkdtemp()))
    external = os.environ.get("MEASURE_METRICS_PORT")  # a controller already running (profiling)
    if external:
        proc.metrics_port = int(external)
    else:
        proc.start(timeout=90)
    try:
        cq = f"cq-{ns}"
        apply(
            cluster,
            flavor("h100", H100),
            cluster_queue(cq, ns, {"h100": n}, stopPolicy="Hold"),
            local_queue("lq", ns, cq),
        )
        docs = [
            {
                "apiVersion": names.API_VERSION,
                "kind": "Workload",
                "metadata": {"name": f"w-{i}", "namespace": ns},
                "spec": {
                    "queueName": "lq",
                    "podSets": [
                        {
                            "name": "main",
                            "count": 1,
                            "template": {
                                "spec": {
                                    "containers": [
                                        {
                                            "name": "c",
                                            "image": "x",
                                            "resources": {"requests": {names.GPU_RESOURCE: "1"}},
                                        }
                                    ]
                                }
                            },
                        }
                    ],
                },
            }
            for i in range(n)
        ]
        if jobs:
            docs = [job(i, ns) for i in range(n)]
        t0 = time.monotonic()
        cluster.kubectl("create", "-f", "-", input=yaml.safe_dump_all(docs), timeout=600)
        created = time.monotonic() - t0
        while (
            jobs
            and len(cluster.kubectl("get", "workloads", "-n", ns, "-o", "name").stdout.split()) < n
        ):
            time.sleep(1)  # every Job has its Workload before the queue opens
        time.sleep(3)  # let the controller see them all
        started = time.monotonic()
        cluster.kubectl(
            "patch", "clusterqueue", cq, "--type=merge", "-p", '{"spec":{"stopPolicy":"None"}}'
        )
        while True:  # the ClusterQueue's count: a cheap poll that does not load the server
            out = cluster.kubectl(
                "get", "clusterqueue", cq, "-o", "jsonpath={.status.admittedWorkloads}"
            ).stdout
            if out.strip() and int(out) >= n:
                break
            time.sleep(0.5)
        while (
            jobs
            and cluster.kubectl(
                "get",
                "jobs",
                "-n",
                ns,
                "-o",
                "jsonpath={.items[?(@.spec.suspend==true)].metadata.name}",
            ).stdout.split()
        ):
            time.sleep(0.5)  # admitted is not enough: every Job must be started
        total = time.monotonic() - started
        what = "Jobs admitted and started" if jobs else "Workloads admitted"
        print(
            f"{n} {what} {total:.2f}s after the queue was released (created in "
            f"{created:.1f}s): {n / total:.0f}/s"
        )
        for line in proc.metrics().splitlines():
            if (
                line.startswith(
                    (
                        "queuectl_scheduling_cycle_duration_seconds_",
                        "queuectl_admissions_per_cycle_",
                    )
                )
                and "bucket" not in line
            ):
                print(" ", line)
    finally:
        proc.stop()
        cluster.kubectl("delete", "namespace", ns, "--wait=false")


if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    main(int(args[0]) if args else 500, "--jobs" in sys.argv)
