"""The web view in headless Chromium against the real control plane: `queuectl ui` passes the
controller's page and data through the kube-apiserver's aggregation layer with the user's
credentials; the page renders the queue, its line with an estimated start and the GPU nodes,
updates by itself when a job is admitted, and shows a namespace user only their queues.

Needs Debian's `chromium` package; without it these tests fail (e2e/chromium.py)."""

from __future__ import annotations

import contextlib
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from functools import partial
from pathlib import Path

import pytest

from e2e.chromium import Page, chromium
from e2e.harness import (
    ControllerProcess,
    apply,
    cluster_queue,
    flavor,
    gpu_job,
    local_queue,
    one_queue,
    running_pods,
    wait_for,
    workload_of,
)
from e2e.visibility_harness import API, ROLES, available, visibility_controller
from queuectl.api import names
from queuectl.testenv.cluster import Cluster
from queuectl.testenv.nodes import H100
from queuectl.testenv.pytest_plugin import StandardFleet


@pytest.fixture(scope="module")
def controller(
    control_plane: Cluster, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ControllerProcess]:
    """This module's controller registers the visibility APIService (pointing at itself)."""
    with visibility_controller(control_plane, tmp_path_factory.mktemp("controller-webview")) as c:
        yield c


@contextlib.contextmanager
def queuectl_ui(cluster: Cluster, log: Path, *args: str) -> Iterator[tuple[str, str]]:
    """`queuectl ui` on a free port: (its base URL, what it said on stderr)."""
    argv = [sys.executable, "-m", "queuectl.cli.main", "ui", "--port", "0"]
    argv += ["--kubeconfig", cluster.kubeconfig, *args]
    with open(log, "w") as err:
        proc = subprocess.Popen(
            argv, stdout=subprocess.PIPE, stderr=err, text=True, start_new_session=True
        )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        found = re.search(r"http://\S+/", line)
        assert found, f"queuectl ui said {line!r}; stderr: {log.read_text()}"
        yield found.group(0), log.read_text()
    finally:
        proc.terminate()
        proc.wait(10)


def ready(cluster: Cluster) -> None:
    cluster.kubectl("apply", "-f", str(ROLES))
    wait_for("the visibility APIService available", lambda: available(cluster), 90)


def row_eta(page: Page, key: str) -> str | None:
    """The estimated-start cell of a pending workload's row, once the page lists it."""
    got = page.evaluate(
        f"(() => {{ const r = document.querySelector('[data-workload=\"{key}\"] .eta');"
        " return r ? r.innerText : null; })()"
    )
    return None if got is None else str(got)


def generation(page: Page) -> int:
    return int(page.evaluate("Number(document.body.dataset.generation || 0)"))


def test_the_page_renders_the_queue_and_updates_when_a_job_is_admitted(
    control_plane: Cluster,
    controller: ControllerProcess,
    gpu_nodes: StandardFleet,
    namespace: str,
    tmp_path: Path,
) -> None:
    """`running` holds the queue's 8 GPUs for at most an hour; `next` waits, and the page
    lists it with an estimated start about an hour out, under its ClusterQueue with the quota
    in use, beside the H100 nodes by rack. Once `running` is deleted, `next` is admitted and the
    page, left open, shows it no longer waiting."""
    ready(control_plane)
    cq = one_queue(control_plane, namespace, 8)
    running = gpu_job("running", namespace, "lq")
    running["metadata"]["labels"][names.LABEL_MAX_EXEC_TIME] = "3600"
    apply(control_plane, running)
    wait_for("running admitted", lambda: running_pods(control_plane, namespace, "running"))
    apply(control_plane, gpu_job("next", namespace, "lq"))
    wl = wait_for("next's Workload", partial(workload_of, control_plane, namespace, "next"))
    key = f"{namespace}/{wl['metadata']['name']}"

    with (
        queuectl_ui(control_plane, tmp_path / "ui.log") as (url, said),
        chromium(tmp_path) as browser,
    ):
        assert "may not read" not in said  # an admin gets the cluster view
        page = browser.open(f"{url.rstrip('/')}{API}/webview?refresh=1")
        eta = page.wait(
            "next listed with an estimated start",
            lambda p: (got := row_eta(p, key)) and re.match(r"\d{4}-\d\d-\d\dT", got) and got,
            timeout=90,
        )
        start = time.strptime(eta, "%Y-%m-%dT%H:%M:%SZ")
        assert 50 * 60 < time.mktime(start) - time.mktime(time.gmtime()) <= 61 * 60
        text = page.text()
        assert f"ClusterQueue {cq}" in text and "1 admitted · 1 pending" in text
        assert page.evaluate("document.querySelectorAll('[data-rack]').length") >= 2
        assert "h100" in text and "GPUs allocated" in text
        before = generation(page)

        control_plane.kubectl("delete", "job", "running", "-n", namespace, "--wait=false")
        page.wait("next admitted, without a reload", lambda p: row_eta(p, key) is None)
        page.wait("the queue's count", lambda p: "0 pending" in p.text())
        assert generation(page) > before
        assert page.evaluate("performance.getEntriesByType('navigation').length") == 1


def test_a_namespace_user_sees_only_their_queues(
    control_plane: Cluster,
    controller: ControllerProcess,
    gpu_nodes: StandardFleet,
    namespace: str,
    tmp_path: Path,
) -> None:
    """Alice (queuectl-batch-user in her namespace) and another team share a ClusterQueue.
    Her `queuectl ui` opens her namespace's view (she may not read the cluster's, and is told
    so): her LocalQueue and her waiting job, never the other team's job or namespace; the
    cluster page refuses her with the API server's 403."""
    ready(control_plane)
    user = f"alice-{namespace}"
    control_plane.kubectl(
        "create", "rolebinding", "alice", "--clusterrole=queuectl-batch-user",
        f"--user={user}", "-n", namespace,
    )  # fmt: skip
    other = f"{namespace[:50]}-other"
    control_plane.kubectl("create", "namespace", other)
    try:
        cq = f"cq-{namespace}"
        both = {"matchExpressions": [{
            "key": "kubernetes.io/metadata.name", "operator": "In", "values": [namespace, other],
        }]}  # fmt: skip
        apply(
            control_plane,
            flavor("h100", H100),
            cluster_queue(cq, namespace, {"h100": 8}, namespaceSelector=both),
            local_queue("lq", namespace, cq),
            local_queue("theirs", other, cq),
        )
        apply(control_plane, gpu_job("running", namespace, "lq"))
        wait_for("running admitted", lambda: running_pods(control_plane, namespace, "running"))
        apply(control_plane, gpu_job("secret-plan", other, "theirs"))
        apply(control_plane, gpu_job("mine", namespace, "lq"))
        mine = wait_for("mine's Workload", partial(workload_of, control_plane, namespace, "mine"))
        key = f"{namespace}/{mine['metadata']['name']}"

        with (
            queuectl_ui(control_plane, tmp_path / "ui.log", "--as", user) as (url, said),
            chromium(tmp_path) as browser,
        ):
            assert "may not read the cluster view" in said
            page = browser.open(f"{url.rstrip('/')}{API}/namespaces/{namespace}/webview")
            page.wait("her job listed", lambda p: row_eta(p, key) is not None, timeout=90)
            text = page.text()
            assert f"namespace {namespace}" in text and f"LocalQueue lq → ClusterQueue {cq}" in text
            assert "secret-plan" not in text and other not in text
            assert page.evaluate("document.querySelectorAll('[data-clusterqueue]').length") == 0
            assert page.evaluate("document.querySelectorAll('[data-node]').length") == 0

            cluster_page = browser.open(f"{url.rstrip('/')}{API}/webview")
            cluster_page.wait("the refusal", lambda p: "403" in p.text())
            assert "secret-plan" not in cluster_page.text()
    finally:
        control_plane.kubectl("delete", "namespace", other, "--wait=false")
