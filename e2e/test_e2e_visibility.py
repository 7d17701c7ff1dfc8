"""The visibility API through the real kube-apiserver: the aggregator authenticates a namespace
user, RBAC lets them read their own LocalQueue's pending list (the `queuectl-batch-user` role's
`localqueues/pendingworkloads`) and nothing else, and the controller answers with the line in
the core's order, trusting only the aggregator's front-proxy certificate."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from e2e.harness import (
    ControllerProcess,
    apply,
    gpu_job,
    one_queue,
    priority_class,
    running_pods,
    wait_for,
    workload_of,
)
from e2e.visibility_harness import API, ROLES, available, visibility_controller
from queuectl import convert
from queuectl.api import names
from queuectl.testenv.cluster import Cluster
from queuectl.testenv.controlplane import ControlPlane
from queuectl.testenv.kubeconfig import write_kubeconfig
from queuectl.testenv.pki import CertificateAuthority
from queuectl.testenv.pytest_plugin import StandardFleet


@pytest.fixture(scope="module")
def controller(
    control_plane: Cluster, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ControllerProcess]:
    """This module's controller registers the visibility APIService (pointing at itself)."""
    log_dir = tmp_path_factory.mktemp("controller-visibility")
    with visibility_controller(control_plane, log_dir) as proc:
        yield proc


def raw(cluster: Cluster, path: str, user: str | None = None) -> tuple[bool, str]:
    """`kubectl get --raw PATH [--as=USER]`: (succeeded, stdout or stderr)."""
    args = ["get", "--raw", path] + ([f"--as={user}"] if user else [])
    done = cluster.kubectl(*args, check=False)
    return done.returncode == 0, done.stdout if done.returncode == 0 else done.stderr


def line(cluster: Cluster, path: str, user: str | None = None) -> list[Any] | None:
    ok, out = raw(cluster, path, user)
    return json.loads(out)["items"] if ok else None


def test_a_namespace_user_reads_their_line_in_order_and_nothing_else(
    control_plane: Cluster,
    controller: ControllerProcess,
    gpu_nodes: StandardFleet,
    namespace: str,
    tmp_path: Path,
) -> None:
    """The queue holds 8 GPUs and `running` takes them; `first`, `second` and then `urgent`
    (a higher priority) wait. Alice, bound to queuectl-batch-user in this namespace, reads the
    line urgent, first, second with the scheduler's reason for each; she is refused another
    namespace's LocalQueue and the ClusterQueue's list, which a cluster admin reads. With her
    own kubeconfig, `queuectl list workloads`, `describe localqueue` and `describe workload`
    rank her jobs through the same API and say so. The job at the head of her line has an
    estimated start (running's time limit is known), the others say why they have none."""
    control_plane.kubectl("apply", "-f", str(ROLES))
    user = f"alice-{namespace}"
    control_plane.kubectl(
        "create", "rolebinding", "alice", "--clusterrole=queuectl-batch-user",
        f"--user={user}", "-n", namespace,
    )  # fmt: skip
    cq = one_queue(control_plane, namespace, 8)
    urgent_class = f"urgent-{namespace}"
    apply(control_plane, priority_class(urgent_class, 1000))
    running = gpu_job("running", namespace, "lq")
    running["metadata"]["labels"][names.LABEL_MAX_EXEC_TIME] = "3600"  # its end is known
    apply(control_plane, running)
    wait_for("running admitted", lambda: running_pods(control_plane, namespace, "running"))
    wl_names = {}
    for name, priority in (("first", None), ("second", None), ("urgent", urgent_class)):
        apply(control_plane, gpu_job(name, namespace, "lq", priority=priority))
        wl = wait_for(f"{name}'s Workload", partial(workload_of, control_plane, namespace, name))
        wl_names[name] = wl["metadata"]["name"]
    wait_for("the visibility APIService available", lambda: available(control_plane), 90)

    mine = f"{API}/namespaces/{namespace}/localqueues/lq/pendingworkloads"
    expected = [wl_names["urgent"], wl_names["first"], wl_names["second"]]
    items = wait_for(
        "alice's line in priority order",
        lambda: (
            (got := line(control_plane, mine, user))
            and [i["metadata"]["name"] for i in got] == expected
            and all(i["reason"] for i in got)
            and got
        ),
    )
    assert [i["positionInLocalQueue"] for i in items] == [0, 1, 2]
    assert items[0]["priority"] == 1000 and items[0]["localQueueName"] == "lq"
    # urgent starts when running's hour is up; first and second wait behind urgent, which has
    # no time limit: later if the cluster's finished work gives a typical runtime, else unknown
    # with the reason.
    items = wait_for(
        "urgent's estimated start",
        lambda: (got := line(control_plane, mine, user)) and got[0]["estimatedStartTime"] and got,
    )
    head = convert.parse_time(items[0]["estimatedStartTime"])
    assert head is not None
    assert items[0]["estimatedStartMessage"].startswith("assuming running jobs end")
    for item in items[1:]:
        later = convert.parse_time(item["estimatedStartTime"])
        assert (later is not None and later >= head) or (
            item["estimatedStartMessage"].startswith("unknown: ")
        )

    ok, err = raw(control_plane, f"{API}/namespaces/default/localqueues/lq/pendingworkloads", user)
    assert not ok and "Forbidden" in err
    ok, err = raw(control_plane, f"{API}/clusterqueues/{cq}/pendingworkloads", user)
    assert not ok and "Forbidden" in err

    admin_view = line(control_plane, f"{API}/clusterqueues/{cq}/pendingworkloads")
    assert admin_view is not None
    assert [i["metadata"]["name"] for i in admin_view] == expected

    if not isinstance(control_plane, ControlPlane):
        return  # an external cluster: no CA here to issue alice a kubeconfig
    lay = control_plane.layout
    ca = CertificateAuthority.load(lay.cert("ca"), lay.key("ca"))
    kubeconfig = tmp_path / "alice.kubeconfig"
    write_kubeconfig(kubeconfig, control_plane.server, ca.cert_pem, ca.issue_client(user), "a")
    done = subprocess.run(
        [sys.executable, "-m", "queuectl.cli.main", "list", "workloads", "-n", namespace,
         "--kubeconfig", str(kubeconfig), "-o", "json"],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "cannot list cluster-wide" in done.stderr and "visibility API" in done.stderr
    rows = json.loads(done.stdout)["items"]
    assert [r["name"] for r in rows if r["position"] is not None] == expected
    assert [r["position"] for r in rows if r["position"] is not None] == [1, 2, 3]
    described = subprocess.run(
        [sys.executable, "-m", "queuectl.cli.main", "describe", "localqueue", "lq", "-n",
         namespace, "--kubeconfig", str(kubeconfig)],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert described.returncode == 0, described.stderr
    assert "visibility API" in described.stderr
    ranked = [w for line in described.stdout.splitlines() for w in line.split() if w in expected]
    assert ranked == expected
    described = subprocess.run(
        [sys.executable, "-m", "queuectl.cli.main", "describe", "workload", wl_names["urgent"],
         "-n", namespace, "--kubeconfig", str(kubeconfig)],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert described.returncode == 0, described.stderr
    assert "visibility API" in described.stderr
    fields = dict(
        (k.strip(), v.strip())
        for k, _, v in (ln.partition(":") for ln in described.stdout.splitlines())
        if v
    )
    assert fields["Position"] == f"1 in ClusterQueue {cq} (1 in LocalQueue lq)", fields
    assert fields["ETA"].startswith("in "), fields  # running's time limit is known
