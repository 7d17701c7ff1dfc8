"""`queuectl describe / list / stop / resume` against the real API server.

The sample cohort tree (config/samples) is applied with its Cohorts and ClusterQueues renamed
for this module (so nothing else in the session, a running controller included, shares them)
and selecting only the test namespace. Admitted workloads get their status written directly,
as the controller would; then every h100 GPU of the tree is in use, and a 4 x 8 GPU gang of
research-llm waits. The CLI must say so exactly, as a user runs it.
"""

from __future__ import annotations

import base64
import os
import re
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client as k8s

from queuectl.api import names
from queuectl.cli.main import main
from queuectl.crds import load as load_crds
from queuectl.testenv import eventually
from queuectl.testenv.cluster import Cluster

SAMPLES = Path(__file__).resolve().parents[2] / "config" / "samples"
QUEUECTL = Path(sys.executable).parent / "queuectl"
GROUP, VERSION = names.GROUP, names.VERSION
SUFFIX = uuid.uuid4().hex[:5]
MANAGER = "queuectl-cli-tests"
GPU = names.GPU_RESOURCE


def sfx(name: str) -> str:
    return f"{name}-{SUFFIX}"


# --- setup ------------------------------------------------------------------------------------
def _apply(api: k8s.ApiClient, obj: dict[str, Any]) -> None:
    custom = k8s.CustomObjectsApi(api)
    plural = {
        "ResourceFlavor": "resourceflavors",
        "Topology": "topologies",
        "WorkloadPriorityClass": "workloadpriorityclasses",
        "Cohort": "cohorts",
        "ClusterQueue": "clusterqueues",
    }[obj["kind"]]
    custom.patch_cluster_custom_object(
        GROUP,
        VERSION,
        plural,
        obj["metadata"]["name"],
        obj,
        field_manager=MANAGER,
        force=True,
        _content_type="application/apply-patch+yaml",
    )


def _crds_established(api: k8s.ApiClient) -> bool:
    ext = k8s.ApiextensionsV1Api(api)
    for crd in load_crds():
        status = ext.read_custom_resource_definition(crd["metadata"]["name"]).status
        conds = status.conditions if status is not None else None
        if not any(c.type == "Established" and c.status == "True" for c in conds or []):
            return False
    return True


def sample_tree(namespace: str) -> list[dict[str, Any]]:
    """Flavors, topology, priority classes as they are; cohorts and queues renamed."""
    out = []
    for f in ("10-topology.yaml", "11-flavors.yaml", "12-priority-classes.yaml",
              "20-cohorts.yaml", "21-cluster-queues.yaml"):  # fmt: skip
        for obj in yaml.safe_load_all((SAMPLES / f).read_text()):
            if obj["kind"] in ("Cohort", "ClusterQueue"):
                obj["metadata"]["name"] = sfx(obj["metadata"]["name"])
                spec = obj.setdefault("spec", {})
                for ref in ("parentName", "cohortName"):
                    if spec.get(ref):
                        spec[ref] = sfx(spec[ref])
                if obj["kind"] == "ClusterQueue":
                    spec["namespaceSelector"] = {
                        "matchLabels": {"kubernetes.io/metadata.name": namespace}
                    }
            out.append(obj)
    return out


@pytest.fixture(scope="module")
def tree_ns(control_plane: Cluster, k8s_client: k8s.ApiClient) -> Iterator[str]:
    """A namespace with two LocalQueues into the renamed sample tree."""
    ext = k8s.ApiextensionsV1Api(k8s_client)
    for crd in load_crds():
        ext.patch_custom_resource_definition(
            crd["metadata"]["name"],
            crd,
            field_manager=MANAGER,
            force=True,
            _content_type="application/apply-patch+yaml",
        )
    eventually(lambda: _crds_established(k8s_client), what="CRDs Established", timeout=30)
    ns = f"cli-{SUFFIX}"
    core = k8s.CoreV1Api(k8s_client)
    core.create_namespace({"metadata": {"name": ns}})  # type: ignore[arg-type]
    for obj in sample_tree(ns):
        _apply(k8s_client, obj)
    yield ns
    custom = k8s.CustomObjectsApi(k8s_client)
    for name in ("research-vision", "research-llm", "prod-inference"):
        custom.delete_cluster_custom_object(GROUP, VERSION, "clusterqueues", sfx(name))
    for name in ("research", "production", "org"):
        custom.delete_cluster_custom_object(GROUP, VERSION, "cohorts", sfx(name))
    core.delete_namespace(ns, propagation_policy="Background")


def create_local_queues(api: k8s.ApiClient, ns: str) -> None:
    custom = k8s.CustomObjectsApi(api)
    for lq, cq in (("vision", "research-vision"), ("llm", "research-llm"),
                   ("infer", "prod-inference"), ("spare", "research-llm")):  # fmt: skip
        custom.create_namespaced_custom_object(
            GROUP,
            VERSION,
            ns,
            "localqueues",
            {
                "apiVersion": f"{GROUP}/{VERSION}",
                "kind": "LocalQueue",
                "metadata": {"name": lq},
                "spec": {"clusterQueue": sfx(cq)},
            },
        )


def as_dict(value: object) -> dict[str, Any]:
    assert isinstance(value, dict)
    return value


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def create_workload(
    api: k8s.ApiClient,
    ns: str,
    name: str,
    queue: str,
    *,
    pods: int,
    gpus: int,
    priority_class: str,
    priority: int,
    admitted_to: str | None = None,
    flavor: str = "h100",
) -> None:
    custom = k8s.CustomObjectsApi(api)
    per_pod = {"cpu": str(8 * gpus), "memory": f"{64 * gpus}Gi"}
    body = {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "Workload",
        "metadata": {"name": name},
        "spec": {
            "queueName": queue,
            "priorityClassName": priority_class,
            "priority": priority,
            "podSets": [
                {
                    "name": "main",
                    "count": pods,
                    "template": {
                        "spec": {
                            "restartPolicy": "Never",
                            "containers": [
                                {
                                    "name": "c",
                                    "image": "busybox",
                                    "resources": {"requests": per_pod, "limits": {GPU: gpus}},
                                }
                            ],
                        }
                    },
                }
            ],
        },
    }
    custom.create_namespaced_custom_object(GROUP, VERSION, ns, "workloads", body)
    if admitted_to is None:
        return
    usage = {GPU: gpus * pods, "cpu": str(8 * gpus * pods), "memory": f"{64 * gpus * pods}Gi"}
    conds = [
        {
            "type": t,
            "status": "True",
            "reason": t,
            "message": "set by the test",
            "lastTransitionTime": _now(),
        }
        for t in (names.COND_QUOTA_RESERVED, names.COND_ADMITTED)
    ]
    status = {
        "status": {
            "admission": {
                "clusterQueue": admitted_to,
                "podSetAssignments": [
                    {
                        "name": "main",
                        "count": pods,
                        "flavors": {GPU: flavor, "cpu": flavor, "memory": flavor},
                        "resourceUsage": usage,
                    }
                ],
            },
            "conditions": conds,
        }
    }
    custom.patch_namespaced_custom_object_status(GROUP, VERSION, ns, "workloads", name, status)


@pytest.fixture(scope="module")
def scenario(tree_ns: str, k8s_client: k8s.ApiClient) -> str:
    """Every GPU of the org in use, nobody borrowing a100 (so nothing can be reclaimed):
    h100: llm 24 (its nominal), vision 24 (16 + 8 borrowed, its borrowingLimit), inference 16;
    a100: llm 4, vision 4, inference 8. Then a 4 x 8 GPU gang waits in research-llm and three
    small workloads wait in research-vision.

    The admitted workloads are created and given their status before any LocalQueue exists,
    so a controller that may be running meanwhile cannot admit them its own way first.
    """
    ns = tree_ns
    for name, queue, cq, pods, gpus, pc, prio, flavor in (
        ("llm-run", "llm", "research-llm", 3, 8, "research", 1000, "h100"),
        ("vision-run", "vision", "research-vision", 3, 8, "research", 1000, "h100"),
        ("serve", "infer", "prod-inference", 2, 8, "production", 10000, "h100"),
        ("llm-small", "llm", "research-llm", 1, 4, "research", 1000, "a100"),
        ("vision-small", "vision", "research-vision", 1, 4, "research", 1000, "a100"),
        ("serve-small", "infer", "prod-inference", 1, 8, "production", 10000, "a100"),
    ):
        create_workload(k8s_client, ns, name, queue, pods=pods, gpus=gpus, priority_class=pc,
                        priority=prio, admitted_to=sfx(cq), flavor=flavor)  # fmt: skip
    create_local_queues(k8s_client, ns)
    create_workload(k8s_client, ns, "gang", "llm", pods=4, gpus=8,
                    priority_class="research", priority=1000)  # fmt: skip
    create_workload(k8s_client, ns, "explore", "vision", pods=1, gpus=1,
                    priority_class="exploration", priority=100)  # fmt: skip
    create_workload(k8s_client, ns, "train-b", "vision", pods=1, gpus=2,
                    priority_class="research", priority=1000)  # fmt: skip
    time.sleep(1.1)  # creationTimestamp has one-second resolution: make train-a younger
    create_workload(k8s_client, ns, "train-a", "vision", pods=1, gpus=2,
                    priority_class="research", priority=1000)  # fmt: skip
    return ns


def cli(kubeconfig: str, *argv: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    """The CLI in-process, its output captured as a pipe would be: whole lines, whatever
    COLUMNS the runner sets (pytest-xdist's workers set it)."""
    capsys.readouterr()
    with pytest.MonkeyPatch.context() as patch:
        patch.delenv("COLUMNS", raising=False)
        rc = main([*argv, "--kubeconfig", kubeconfig])
    out, err = capsys.readouterr()
    return rc, out, err


# --- tests ------------------------------------------------------------------------------------
def test_describe_workload_names_resource_flavor_shortfall_and_holders(
    scenario: str, kubeconfig: str
) -> None:
    """Run as a user would: the installed entry point, KUBECONFIG, output piped."""
    env = {**os.environ, "KUBECONFIG": kubeconfig, "NO_COLOR": "1"}
    done = subprocess.run(
        [str(QUEUECTL), "describe", "workload", "gang", "-n", scenario],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "\x1b[" not in out  # piped: plain
    assert "Reason:      WaitingForQuota" in out
    assert "needs 32 nvidia.com/gpu of flavor h100, 0 available: 32 short" in out
    held = next(line for line in out.splitlines() if line.startswith("Held by:"))
    assert f"{sfx('research-llm')} uses 24" in held
    assert f"{sfx('research-vision')} uses 24 (8 borrowed)" in held
    assert "Preemption:  cannot help" in out
    assert f"Position:     1 of 1 in ClusterQueue {sfx('research-llm')}" in out


def test_list_workloads_shows_the_scheduler_order(
    scenario: str, kubeconfig: str, capsys: pytest.CaptureFixture[str]
) -> None:
    rc, out, err = cli(
        kubeconfig, "list", "wl", "-n", scenario, "--status", "pending", "-o", "wide",
        capsys=capsys,
    )  # fmt: skip
    assert rc == 0, err
    rows = {line.split()[0]: line.split() for line in out.splitlines()[1:]}
    assert set(rows) == {"train-a", "train-b", "explore", "gang"}, out
    header = out.splitlines()[0].split()
    pos = header.index("POSITION")
    # research first by priority, then older first; exploration last
    assert [rows[n][pos] for n in ("train-b", "train-a", "explore", "gang")] == ["1", "2", "3", "1"]
    assert "WaitingForQuota:" in rows["gang"][header.index("REASON")]


def test_describe_queues_and_cohort(
    scenario: str, kubeconfig: str, capsys: pytest.CaptureFixture[str]
) -> None:
    rc, out, err = cli(kubeconfig, "describe", "cq", sfx("research-vision"), capsys=capsys)
    assert rc == 0, err
    gpu_row = next(line.split() for line in out.splitlines() if "nvidia.com/gpu" in line)
    assert gpu_row[:8] == ["h100", "nvidia.com/gpu", "16", "8", "all", "24", "8", "0"]
    assert re.search(r"^1\s+" + re.escape(f"{scenario}/train-b"), out, re.M)
    assert f"{scenario}/vision-run" in out.split("\nAdmitted\n")[-1]

    rc, out, err = cli(kubeconfig, "describe", "lq", "llm", "-n", scenario, capsys=capsys)
    assert rc == 0, err
    assert re.search(r"^h100\s+nvidia.com/gpu\s+24$", out, re.M)

    rc, out, err = cli(kubeconfig, "describe", "co", sfx("research"), capsys=capsys)
    assert rc == 0, err
    assert f"ClusterQueues: {sfx('research-llm')}, {sfx('research-vision')}" in out


def test_stop_and_resume_write_the_spec(
    scenario: str, kubeconfig: str, k8s_client: k8s.ApiClient, capsys: pytest.CaptureFixture[str]
) -> None:
    custom = k8s.CustomObjectsApi(k8s_client)
    cq = sfx("prod-inference")
    rc, out, err = cli(kubeconfig, "stop", "cq", cq, capsys=capsys)
    assert rc == 0, err
    got = as_dict(custom.get_cluster_custom_object(GROUP, VERSION, "clusterqueues", cq))
    assert got["spec"]["stopPolicy"] == "Hold"
    rc, out, _ = cli(kubeconfig, "list", "cq", capsys=capsys)
    assert re.search(re.escape(cq) + r"\s+\S+\s+\S+\s+Stopped \(Hold\)", out)
    assert cli(kubeconfig, "resume", "cq", cq, capsys=capsys)[0] == 0
    got = as_dict(custom.get_cluster_custom_object(GROUP, VERSION, "clusterqueues", cq))
    assert got["spec"]["stopPolicy"] == "None"

    rc, out, err = cli(kubeconfig, "stop", "lq", "spare", "-n", scenario, "--drain", capsys=capsys)
    assert rc == 0, err
    lq = as_dict(
        custom.get_namespaced_custom_object(GROUP, VERSION, scenario, "localqueues", "spare")
    )
    assert lq["spec"]["stopPolicy"] == "HoldAndDrain"
    assert cli(kubeconfig, "resume", "lq", "spare", "-n", scenario, capsys=capsys)[0] == 0

    assert cli(kubeconfig, "stop", "wl", "explore", "-n", scenario, capsys=capsys)[0] == 0
    wl = as_dict(
        custom.get_namespaced_custom_object(GROUP, VERSION, scenario, "workloads", "explore")
    )
    assert wl["spec"]["active"] is False
    rc, out, _ = cli(kubeconfig, "describe", "wl", "explore", "-n", scenario, capsys=capsys)
    assert "Reason:      Inactive" in out
    assert cli(kubeconfig, "resume", "wl", "explore", "-n", scenario, capsys=capsys)[0] == 0
    wl = as_dict(
        custom.get_namespaced_custom_object(GROUP, VERSION, scenario, "workloads", "explore")
    )
    assert wl["spec"]["active"] is True


def test_describe_job_finds_the_workload_the_job_owns(
    scenario: str, kubeconfig: str, k8s_client: k8s.ApiClient, capsys: pytest.CaptureFixture[str]
) -> None:
    """A user knows their Job's name, not the Workload's: `describe job` shows the same page."""
    container = {"name": "c", "image": "busybox", "resources": {"limits": {GPU: "8"}}}
    job = k8s.BatchV1Api(k8s_client).create_namespaced_job(
        scenario,
        {  # type: ignore[arg-type]
            "metadata": {"name": "llama-gang", "labels": {names.LABEL_QUEUE_NAME: "llm"}},
            "spec": {
                "suspend": True,
                "parallelism": 4,
                "completions": 4,
                "template": {"spec": {"restartPolicy": "Never", "containers": [container]}},
            },
        },
    )
    owner = {"apiVersion": "batch/v1", "kind": "Job", "name": "llama-gang", "uid": job.metadata.uid}
    k8s.CustomObjectsApi(k8s_client).patch_namespaced_custom_object(
        GROUP, VERSION, scenario, "workloads", "gang", {"metadata": {"ownerReferences": [owner]}}
    )
    rc, by_job, err = cli(kubeconfig, "describe", "job", "llama-gang", "-n", scenario,
                          capsys=capsys)  # fmt: skip
    assert rc == 0, err
    _, by_workload, _ = cli(kubeconfig, "describe", "wl", "gang", "-n", scenario, capsys=capsys)
    assert "Reason:      WaitingForQuota" in by_job

    def timeless(out: str) -> list[str]:  # "Created: 3s ago" may tick between the two calls
        return [line for line in out.splitlines() if not line.startswith("Created")]

    assert timeless(by_job) == timeless(by_workload)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["describe", "job", "nope", "-n", "default"],
         'Job "nope" in namespace default not found'),
        (["describe", "wl", "nope", "-n", "default"],
         'Workload "nope" in namespace default not found'),
        (["describe", "cq", "nope"], 'ClusterQueue "nope" not found'),
        (["stop", "lq", "nope", "-n", "default"],
         'LocalQueue "nope" in namespace default not found'),
        (["describe", "co", "nope"], 'Cohort "nope" not found'),
    ],
)  # fmt: skip
def test_missing_objects_are_one_line_errors(
    tree_ns: str, kubeconfig: str, argv: list[str], message: str,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    rc, _, err = cli(kubeconfig, *argv, capsys=capsys)
    assert rc == 1
    assert err.startswith(f"queuectl: error: {message}") and err.count("\n") == 1


def _restricted_kubeconfig(api: k8s.ApiClient, admin: str, ns: str, path: Path) -> str:
    """A kubeconfig for a ServiceAccount that RBAC allows nothing."""
    core = k8s.CoreV1Api(api)
    core.create_namespaced_service_account(ns, {"metadata": {"name": "nobody"}})  # type: ignore[arg-type]
    token = core.create_namespaced_service_account_token(
        "nobody",
        ns,
        {"spec": {"expirationSeconds": 600}},  # type: ignore[arg-type]
    ).status.token  # type: ignore[union-attr]
    cfg = yaml.safe_load(Path(admin).read_text())
    cluster = cfg["clusters"][0]["cluster"]
    if "certificate-authority" in cluster:
        ca = Path(cluster.pop("certificate-authority")).read_bytes()
        cluster["certificate-authority-data"] = base64.b64encode(ca).decode()
    cfg["users"] = [{"name": "nobody", "user": {"token": token}}]
    for ctx in cfg["contexts"]:
        ctx["context"]["user"] = "nobody"
    path.write_text(yaml.safe_dump(cfg))
    return str(path)


def test_access_denied_is_one_line(
    tree_ns: str, kubeconfig: str, k8s_client: k8s.ApiClient, tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    restricted = _restricted_kubeconfig(k8s_client, kubeconfig, tree_ns, tmp_path / "kc")
    for argv in (["list", "wl", "-A"], ["describe", "cq", sfx("research-llm")]):
        rc, _, err = cli(restricted, *argv, capsys=capsys)
        assert rc == 1
        assert err.startswith("queuectl: error: access denied: ") and err.count("\n") == 1
        assert "forbidden" in err


def test_unreachable_server_is_one_line(
    tmp_path: Path, kubeconfig: str, capsys: pytest.CaptureFixture[str]
) -> None:
    cfg = yaml.safe_load(Path(kubeconfig).read_text())
    cfg["clusters"][0]["cluster"]["server"] = "https://127.0.0.1:1"
    path = tmp_path / "kc"
    path.write_text(yaml.safe_dump(cfg))
    rc, _, err = cli(str(path), "list", "cq", capsys=capsys)
    assert rc == 1
    assert err.startswith("queuectl: error: cannot reach the API server at https://127.0.0.1:1")
    assert err.count("\n") == 1
