"""Kueue's published samples, converted by `queuectl import kueue`, on a real control plane.

What the command writes is what `kubectl apply` takes: every sample's output is applied as
written with a server-side dry run (the CRDs' schemas and CEL rules, and queuectl's validating
webhooks, all answer; nothing is left behind). Then the documentation's single-ClusterQueue
setup is applied for real and Jobs are admitted by the controller: the converted objects do
not only pass validation, they queue work. The controller runs with --kueue-queue-label, so the
Job may keep the label it had for Kueue; a Job whose two queue labels disagree is refused.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from e2e.harness import ControllerProcess, admitted, apply, get, unregister_webhooks, wait_for
from queuectl.api import names
from queuectl.cli.main import main
from queuectl.testenv.cluster import Cluster

DATA = Path(__file__).resolve().parents[1] / "data" / "kueue"
SAMPLES = sorted(DATA.glob("*.yaml"))


@pytest.fixture(scope="module")
def controller(
    control_plane: Cluster, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ControllerProcess]:
    """The harness's module controller, with Kueue's queue label honoured."""
    proc = ControllerProcess(
        control_plane.kubeconfig, tmp_path_factory.mktemp("controller"), ["--kueue-queue-label"]
    )
    proc.start()
    try:
        yield proc
    finally:
        proc.stop()
        unregister_webhooks(control_plane)


def imported(sample: Path, out: Path) -> str:
    """The YAML `queuectl import kueue -f SAMPLE -o OUT` writes."""
    assert main(["import", "kueue", "-f", str(sample), "-o", str(out)]) == 0
    return out.read_text()


def test_every_converted_sample_is_accepted_by_kubectl_apply(
    control_plane: Cluster, controller: ControllerProcess, tmp_path: Path
) -> None:
    for sample in SAMPLES:
        out = tmp_path / sample.name
        objects = list(yaml.safe_load_all(imported(sample, out)))
        done = control_plane.kubectl("apply", "--dry-run=server", "-f", str(out), check=False)
        assert done.returncode == 0, f"{sample.name}: {done.stderr}"
        applied = [line for line in done.stdout.splitlines() if "(server dry run)" in line]
        assert len(applied) == len(objects), f"{sample.name}: {done.stdout}"
        assert not any(o["apiVersion"] != names.API_VERSION for o in objects)


def cpu_job(name: str, namespace: str, labels: dict[str, str]) -> dict[str, Any]:
    container = {
        "name": "main",
        "image": "registry.k8s.io/pause:3.10",
        "resources": {"requests": {"cpu": "1", "memory": "1Gi"}},
    }
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": labels,
        },
        "spec": {
            "template": {"spec": {"restartPolicy": "Never", "containers": [container]}},
        },
    }


def test_the_converted_single_clusterqueue_setup_admits_jobs_labelled_for_either(
    control_plane: Cluster, controller: ControllerProcess, namespace: str, tmp_path: Path
) -> None:
    objects = list(
        yaml.safe_load_all(imported(DATA / "single-clusterqueue-setup.yaml", tmp_path / "q.yaml"))
    )
    for obj in objects:
        if obj["kind"] == "LocalQueue":
            obj["metadata"]["namespace"] = namespace  # the sample says `default`
    apply(control_plane, *objects)
    try:
        apply(control_plane, cpu_job("first", namespace, {names.LABEL_QUEUE_NAME: "user-queue"}))
        wait_for("the job admitted", lambda: admitted(control_plane, namespace, "first"))
        assert get(control_plane, "job", "first", namespace)["spec"]["suspend"] is False
        # The label the team's tooling writes for Kueue: queued the same, queuectl's label added.
        kueue = {names.LABEL_KUEUE_QUEUE_NAME: "user-queue"}
        apply(control_plane, cpu_job("second", namespace, kueue))
        wait_for(
            "the Kueue-labelled job admitted", lambda: admitted(control_plane, namespace, "second")
        )
        labels = get(control_plane, "job", "second", namespace)["metadata"]["labels"]
        assert labels[names.LABEL_QUEUE_NAME] == "user-queue"
        mixed = cpu_job("mixed", namespace, {**kueue, names.LABEL_QUEUE_NAME: "elsewhere"})
        done = control_plane.kubectl("apply", "-f", "-", input=yaml.safe_dump(mixed), check=False)
        assert done.returncode != 0 and "name different LocalQueues" in done.stderr, done.stderr
        queue = get(control_plane, "clusterqueue", "cluster-queue")
        assert queue["spec"]["namespaceSelector"] == {}
    finally:
        control_plane.kubectl(
            "delete", "job", "first", "-n", namespace, "--wait=false", check=False
        )
        for obj in reversed(objects):
            args = ["delete", obj["kind"].lower(), obj["metadata"]["name"], "--wait=false"]
            if obj["kind"] == "LocalQueue":
                args += ["-n", namespace]
            control_plane.kubectl(*args, check=False)
