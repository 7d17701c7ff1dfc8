"""The provisioning check's cluster-autoscaler signal on a real API server: a check whose
parameters name a ProvisioningRequest class makes, for each reservation, PodTemplates of the pod
sets' exact shape and a ProvisioningRequest of that class; the test plays cluster-autoscaler
(the autoscaler itself is not served here) by setting the request's conditions: Provisioned
admits the workload, Failed releases its quota (Retry) and withdraws the request.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
import yaml

from e2e.harness import (
    ControllerProcess,
    apply,
    cluster_queue,
    controller,
    flavor,
    gpu_job,
    is_true,
    items,
    local_queue,
    wait_for,
    workload_of,
)
from queuectl.api import names
from queuectl.testenv import provreq
from queuectl.testenv.cluster import Cluster
from queuectl.testenv.nodes import H100

__all__ = ["controller"]

CHECK = "ca-capacity"
KLASS = "check-capacity.autoscaling.x-k8s.io"


@pytest.fixture(scope="module")
def provreq_crd(control_plane: Cluster) -> Cluster:
    control_plane.kubectl("apply", "-f", "-", input=yaml.safe_dump(provreq.crd()))
    control_plane.kubectl(
        "wait", "--for=condition=Established", f"crd/{provreq.NAME}", "--timeout=60s"
    )
    return control_plane


def queue(cluster: Cluster, namespace: str) -> None:
    cq = f"cq-{namespace}"
    check = {
        "apiVersion": names.API_VERSION,
        "kind": "AdmissionCheck",
        "metadata": {"name": CHECK},
        "spec": {
            "controllerName": names.CHECK_PROVISIONING,
            "parameters": {
                "apiGroup": names.PROVREQ_GROUP,
                "kind": names.PROVREQ_PARAMETERS_KIND,
                "name": KLASS,
            },
        },
    }
    apply(
        cluster,
        check,
        flavor("h100", H100),
        cluster_queue(cq, namespace, {"h100": 16}, admissionChecks=[CHECK]),
        local_queue("lq", namespace, cq),
    )


def requests(cluster: Cluster, namespace: str) -> list[dict[str, Any]]:
    return items(cluster, f"{provreq.NAME}", namespace)


def set_condition(cluster: Cluster, namespace: str, name: str, kind: str) -> None:
    """What cluster-autoscaler would write."""
    cond = {
        "type": kind,
        "status": "True",
        "reason": kind,
        "message": f"played by the test: {kind}",
        "lastTransitionTime": "2026-01-01T00:00:00Z",
    }
    cluster.kubectl(
        "patch",
        provreq.NAME,
        name,
        "-n",
        namespace,
        "--subresource=status",
        "--type=merge",
        "-p",
        json.dumps({"status": {"conditions": [cond]}}),
    )


def made_request(cluster: Cluster, namespace: str) -> dict[str, Any]:
    found = wait_for("a ProvisioningRequest", lambda: requests(cluster, namespace), timeout=60)
    (req,) = found
    return dict(req)


def test_provisioned_admits_the_workload_behind_a_request_of_its_exact_shape(
    provreq_crd: Cluster, controller: ControllerProcess, namespace: str
) -> None:
    queue(provreq_crd, namespace)
    apply(provreq_crd, gpu_job("train", namespace, "lq", pods=2, gpus=8))
    req = made_request(provreq_crd, namespace)
    assert req["spec"]["provisioningClassName"] == KLASS
    (pod_set,) = req["spec"]["podSets"]
    assert pod_set["count"] == 2
    (template,) = items(provreq_crd, "podtemplates", namespace)
    assert template["metadata"]["name"] == pod_set["podTemplateRef"]["name"]
    spec = template["template"]["spec"]
    assert spec["containers"][0]["resources"]["requests"][names.GPU_RESOURCE] == "8"
    terms = spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert {"key": names.LABEL_GPU_PRODUCT, "operator": "In", "values": [H100]} in terms[
        "nodeSelectorTerms"
    ][0]["matchExpressions"]
    wl = workload_of(provreq_crd, namespace, "train")
    assert wl is not None and not is_true(wl, names.COND_ADMITTED)

    set_condition(provreq_crd, namespace, req["metadata"]["name"], "Provisioned")

    def admitted() -> bool:
        return is_true(workload_of(provreq_crd, namespace, "train"), names.COND_ADMITTED)

    wait_for("admitted once Provisioned", admitted, timeout=60)
    wl = workload_of(provreq_crd, namespace, "train")
    assert wl is not None
    (entry,) = wl["status"]["admissionChecks"]
    assert entry["state"] == "Ready" and "Provisioned" in entry["message"]
    assert requests(provreq_crd, namespace)  # its booking holds the capacity for the pods


def test_failed_releases_the_quota_and_withdraws_the_request(
    provreq_crd: Cluster, controller: ControllerProcess, namespace: str
) -> None:
    queue(provreq_crd, namespace)
    apply(provreq_crd, gpu_job("train", namespace, "lq", pods=1, gpus=8))
    req = made_request(provreq_crd, namespace)
    old = {req["metadata"]["uid"]} | {
        t["metadata"]["uid"] for t in items(provreq_crd, "podtemplates", namespace)
    }
    set_condition(provreq_crd, namespace, req["metadata"]["name"], "Failed")

    def released() -> dict[str, Any] | None:
        wl = workload_of(provreq_crd, namespace, "train")
        return wl if wl is not None and (wl["status"].get("requeueState") or {}) else None

    wl = wait_for("the reservation released with back-off", released, timeout=60)
    assert wl["status"]["requeueState"]["count"] == 1

    def left() -> set[str]:
        now = requests(provreq_crd, namespace) + items(provreq_crd, "podtemplates", namespace)
        return old & {o["metadata"]["uid"] for o in now}

    # After its back-off it reserves again and asks anew: only the failed request must be gone.
    wait_for("the failed request and its templates withdrawn", lambda: not left(), timeout=30)
