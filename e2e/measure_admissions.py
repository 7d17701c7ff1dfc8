"""Admissions per second the controller sustains on the local control plane (a figure, not a test).

    QUEUECTL_KUBECONFIG=... python -m e2e.measure_admissions [N]

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

import yaml

from e2e.harness import ControllerProcess, apply, cluster_queue, flavor, local_queue
from queuectl.api import names
from queuectl.testenv.cluster import Cluster
from queuectl.testenv.nodes import H100


def main(n: int) -> None:
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
        t0 = time.monotonic()
        cluster.kubectl("create", "-f", "-", input=yaml.safe_dump_all(docs), timeout=600)
        created = time.monotonic() - t0
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
        total = time.monotonic() - started
        print(
            f"{n} workloads (created in {created:.1f}s): all admitted {total:.2f}s after "
            f"the queue was released: {n / total:.0f} admissions/s"
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
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 500)
