"""What the real-install e2e builds and reads: CPU Jobs and queues on the real node, the
trainer sample adapted to a test namespace, and small readers over kubectl's JSON."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from queuectl.api import names
from queuectl.testenv.nodeconfig import REAL_NODE_LABEL
from queuectl.testenv.realinstall import RealInstall

SAMPLES = Path(__file__).resolve().parents[1] / "config" / "samples"


def cpu_job(name: str, namespace: str, image: str, cpu: str, *, pull: str) -> dict[str, object]:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {names.LABEL_QUEUE_NAME: "lq"},
        },
        "spec": {
            "backoffLimit": 0,
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "terminationGracePeriodSeconds": 0,
                    "containers": [
                        {
                            "name": "main",
                            "image": image,
                            "imagePullPolicy": pull,
                            "command": ["python3", "-c", "import time; time.sleep(3600)"],
                            "resources": {"requests": {"cpu": cpu}, "limits": {"cpu": cpu}},
                        }
                    ],
                }
            },
        },
    }


def pods(install: RealInstall, namespace: str, job: str) -> list[dict[str, Any]]:
    out = install.plane.kubectl(
        "get", "pods", "-n", namespace, "-l", f"job-name={job}", "-o", "json"
    ).stdout
    found: list[dict[str, Any]] = json.loads(out)["items"]
    return found


def workload_condition(
    install: RealInstall, namespace: str, job: str, type_: str
) -> dict[str, Any]:
    out = install.plane.kubectl(
        "get", "workloads.queuectl.io", "-n", namespace, "-o", "json"
    ).stdout
    for wl in json.loads(out)["items"]:
        if any(r.get("name") == job for r in wl["metadata"].get("ownerReferences") or ()):
            for cond in (wl.get("status") or {}).get("conditions") or ():
                if cond.get("type") == type_:
                    return dict(cond)
    return {}


NOTICE_GRACE_S = 30
"""The trainer's notice: time for the kubelet to refresh the downward-API file, and more."""


def trainer_sample(
    namespace: str, image: str, cpu: str, checkpoints: Path, priority: str
) -> dict[str, Any]:
    """The sample trainer as shipped, but for its namespace, queue, priority, image, size and
    checkpoint volume (a host directory of the real node, read back by the test)."""
    (job,) = yaml.safe_load_all((SAMPLES / "32-preemption-notice.yaml").read_text())
    job["metadata"]["namespace"] = namespace
    job["metadata"]["labels"] = {
        names.LABEL_QUEUE_NAME: "lq",
        names.LABEL_PRIORITY_CLASS: priority,
    }
    pod = job["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    container |= {"image": image, "imagePullPolicy": "Never"}
    container["resources"] = {"requests": {"cpu": cpu}, "limits": {"cpu": cpu}}
    (volume,) = [v for v in pod["volumes"] if v["name"] == "checkpoints"]
    del volume["emptyDir"]
    volume["hostPath"] = {"path": str(checkpoints), "type": "Directory"}
    return dict(job)


def lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


def job_annotations(install: RealInstall, namespace: str, job: str) -> dict[str, str]:
    out = install.plane.kubectl("get", "job", job, "-n", namespace, "-o", "json").stdout
    found: dict[str, str] = json.loads(out)["metadata"].get("annotations") or {}
    return found


def real_node_flavor() -> dict[str, Any]:
    return {
        "apiVersion": names.API_VERSION,
        "kind": "ResourceFlavor",
        "metadata": {"name": "real-node"},
        "spec": {"nodeLabels": {REAL_NODE_LABEL: "true"}},
    }


def cpu_queue(name: str, namespace: str, cpu: str, **spec: Any) -> dict[str, Any]:
    """A ClusterQueue of `cpu` on the real node for `namespace`."""
    flavors = [{"name": "real-node", "resources": [{"name": "cpu", "nominalQuota": cpu}]}]
    return {
        "apiVersion": names.API_VERSION,
        "kind": "ClusterQueue",
        "metadata": {"name": name},
        "spec": {
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}},
            "resourceGroups": [{"coveredResources": ["cpu"], "flavors": flavors}],
            **spec,
        },
    }
