"""The workload operators' table, their generated config and webhook registration, and the
one build-once cache every testenv build shares."""

from __future__ import annotations

import base64
import dataclasses
import json
import sys
from pathlib import Path

import pytest
import yaml

from queuectl.cli.main import main
from queuectl.testenv import operatorbuild, operatorrun, operators
from queuectl.testenv.build import build_once
from queuectl.testenv.errors import BuildFailed
from queuectl.testenv.operatorargs import RunDir, kubebuilder_config
from queuectl.testenv.operatorhooks import rewrite


def test_all_names_every_operator_in_table_order() -> None:
    assert operators.parse_names("all") == [
        "jobset",
        "lws",
        "ray",
        "training-operator",
        "mpi-operator",
        "trainer",
        "karpenter",
    ]
    assert operators.parse_names(" trainer, jobset ") == ["jobset", "trainer"]


def test_an_unknown_operator_is_refused_naming_the_known_ones(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(operators.UnknownOperator, match="unknown operator 'kueue'"):
        operators.parse_names("jobset,kueue")
    with pytest.raises(SystemExit) as exit_:
        main(["dev", "build", "--operators", "jobset,kueue"])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert "unknown operator 'kueue'" in err
    assert "jobset, lws, ray, training-operator, mpi-operator, trainer, karpenter, or all" in err


def test_cache_keys_follow_the_pinned_version_and_never_the_control_plane() -> None:
    jobset = operators.lookup("jobset")
    key = operatorbuild.cache_key(jobset)
    assert key.startswith("operator-jobset-v0.11.0-")
    bumped = dataclasses.replace(jobset, version="v0.12.0")
    assert operatorbuild.cache_key(bumped) != key
    assert len({operatorbuild.cache_key(op) for op in operators.OPERATORS.values()}) == 7


@pytest.mark.parametrize(
    ("operator", "leader_election_flag"),
    [
        ("ray", "--enable-leader-election=false"),
        ("training-operator", "--leader-elect=false"),
    ],
)
def test_flag_driven_operators_run_without_leader_election_or_metrics(
    tmp_path: Path, operator: str, leader_election_flag: str
) -> None:
    run = RunDir(tmp_path, health_port=1001, webhook_port=1002)
    argv = operators.lookup(operator).argv(Path("/bin/op"), run)
    assert leader_election_flag in argv
    assert any(a.startswith("--metrics") and a.endswith("=0") for a in argv)
    assert "--health-probe-bind-address=127.0.0.1:1001" in argv


def test_mpi_operator_and_training_operator_never_both_serve_mpijobs(tmp_path: Path) -> None:
    """training-operator v1.8.1 serves an MPIJob (v1) under the CRD name mpi-operator's
    v2beta1 uses: it runs without that scheme and CRD, so both can run in one cluster."""
    run = RunDir(tmp_path, health_port=1001, webhook_port=1002)
    training = operators.lookup("training-operator")
    argv = training.argv(Path("/bin/op"), run)
    assert "--enable-scheme=pytorchjob" in argv and "--enable-scheme=mpijob" not in argv
    assert not any("mpijobs" in glob for glob in training.crds)
    mpi = operators.lookup("mpi-operator")
    assert (mpi.module, mpi.version) == ("github.com/kubeflow/mpi-operator", "v0.6.0")
    assert mpi.crds == ("manifests/base/kubeflow.org_mpijobs.yaml",)
    argv = mpi.argv(Path("/bin/mpi-operator"), run)
    assert "--lock-namespace=kube-system" in argv and "--monitoring-port=0" in argv
    assert mpi.ready_url == "http://127.0.0.1:8080/healthz"


def test_karpenter_runs_its_kwok_provider_alone_with_gpu_instance_types(tmp_path: Path) -> None:
    op = operators.lookup("karpenter")
    assert op.package == "sigs.k8s.io/karpenter/kwok" and op.version == "v1.9.0"
    run = RunDir(tmp_path, health_port=1001, webhook_port=1002)
    argv = op.argv(Path("/bin/karpenter"), run)
    assert "--disable-leader-election" in argv and "--health-probe-port=1001" in argv
    (path,) = [a.split("=", 1)[1] for a in argv if a.startswith("--instance-types-file-path=")]
    types = {t["name"]: t for t in json.loads(Path(path).read_text())}
    assert types["gpu-8x-h100"]["resources"]["nvidia.com/gpu"] == "8"
    assert all(t["offerings"][0]["Available"] for t in types.values())


@pytest.mark.parametrize(
    ("api_version", "cert_key", "has_cert_dir"),
    [
        ("config.jobset.x-k8s.io/v1alpha1", "internalCertManagement", True),
        ("config.trainer.kubeflow.org/v1alpha1", "certManagement", False),
    ],
)
def test_config_files_switch_off_leader_election_cert_management_and_metrics(
    tmp_path: Path, api_version: str, cert_key: str, has_cert_dir: bool
) -> None:
    run = RunDir(tmp_path, health_port=1001, webhook_port=1002)
    config = yaml.safe_load(kubebuilder_config(api_version, run, cert_key=cert_key))
    assert config["apiVersion"] == api_version and config["kind"] == "Configuration"
    assert config["leaderElection"] == {"leaderElect": False}
    assert config[cert_key] == {"enable": False}
    assert config["metrics"] == {"bindAddress": "0"}
    assert config["health"] == {"healthProbeBindAddress": "127.0.0.1:1001"}
    assert config["webhook"]["port"] == 1002 and config["webhook"]["host"] == "127.0.0.1"
    assert ("certDir" in config["webhook"]) is has_cert_dir


def test_a_run_dir_holds_a_serving_cert_where_controller_runtime_looks_under_tmpdir(
    tmp_path: Path,
) -> None:
    run = RunDir.create(tmp_path / "jobset", 1001, 1002)
    assert run.cert_dir == run.tmp / "k8s-webhook-server" / "serving-certs"
    for name in ("tls.crt", "tls.key", "ca.crt"):
        assert (run.cert_dir / name).stat().st_size > 0
    assert (run.cert_dir / "tls.key").stat().st_mode & 0o077 == 0


MANIFESTS = """
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingWebhookConfiguration
metadata:
  name: mutating-webhook-configuration
webhooks:
- name: mjobset.kb.io
  clientConfig:
    service: {name: webhook-service, namespace: system, path: /mutate-jobset}
  rules: [{apiGroups: [jobset.x-k8s.io], resources: [jobsets], operations: [CREATE]}]
- name: mpod.kb.io
  clientConfig:
    service: {name: webhook-service, namespace: system, path: /mutate--v1-pod}
  rules: [{apiGroups: [""], resources: [pods], operations: [CREATE]}]
"""


def test_webhooks_point_at_the_local_process_and_pod_hooks_only_see_its_pods() -> None:
    (config,) = rewrite(
        yaml.safe_load_all(MANIFESTS),
        operator="jobset",
        port=9443,
        ca_pem=b"CA",
        pod_label="jobset.sigs.k8s.io/jobset-name",
    )
    assert config["metadata"] == {"name": "jobset-mutating-webhook-configuration"}
    jobsets, pods = config["webhooks"]
    assert jobsets["clientConfig"] == {
        "url": "https://127.0.0.1:9443/mutate-jobset",
        "caBundle": base64.b64encode(b"CA").decode(),
    }
    assert "objectSelector" not in jobsets
    assert pods["clientConfig"]["url"] == "https://127.0.0.1:9443/mutate--v1-pod"
    assert pods["objectSelector"] == {
        "matchExpressions": [{"key": "jobset.sigs.k8s.io/jobset-name", "operator": "Exists"}]
    }


def test_without_a_pod_label_pod_webhooks_are_left_out_rather_than_catch_every_pod() -> None:
    (config,) = rewrite(
        yaml.safe_load_all(MANIFESTS), operator="x", port=1, ca_pem=b"CA", pod_label=None
    )
    assert [w["name"] for w in config["webhooks"]] == ["mjobset.kb.io"]


def test_build_once_builds_the_first_time_only_and_records_how_long(tmp_path: Path) -> None:
    calls: list[Path] = []

    def make(staging: Path, log: Path) -> dict[str, object]:
        calls.append(staging)
        (staging / "tool").write_text("x")
        return {"version": "v1"}

    lines: list[str] = []
    first = build_once(
        "tool-v1", make, announce="Building", what="tool", progress=lines.append, root=tmp_path
    )
    second = build_once(
        "tool-v1", make, announce="Building", what="tool", progress=lines.append, root=tmp_path
    )
    assert first == second == tmp_path / "tool-v1"
    assert len(calls) == 1 and (first / "tool").exists()
    record = json.loads((first / "VERSIONS.json").read_text())
    assert record["version"] == "v1" and "build_seconds" in record
    assert lines[0] == "Building" and lines[1].startswith("Built tool in ")


def test_a_failed_build_leaves_nothing_that_looks_built(tmp_path: Path) -> None:
    def make(staging: Path, log: Path) -> dict[str, object]:
        (staging / "half").write_text("x")
        raise BuildFailed("go build failed", "read the log")

    with pytest.raises(BuildFailed):
        build_once(
            "tool-v1", make, announce="", what="tool", progress=lambda _: None, root=tmp_path
        )
    assert not (tmp_path / "tool-v1").exists()


class _Plane:
    """What `operatorrun.ensure_running` reads of a ControlPlane: its supervisor and progress."""

    def __init__(self, work_dir: Path) -> None:
        from queuectl.testenv.process import Supervisor

        self.supervisor = Supervisor(work_dir)
        self.said: list[str] = []

    def progress(self, line: str) -> None:
        self.said.append(line)


def test_an_operator_that_died_is_started_again_and_a_running_one_is_left_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """mpi-operator exits when it cannot renew its leader Lease (the API server restarted
    under it): the next module that asks for it gets it running again."""
    plane = _Plane(tmp_path)
    started: list[str] = []

    def start(p: object, name: str, progress: object = None) -> Path:
        started.append(name)
        plane.supervisor.spawn(
            operatorrun.process_name(name), [sys.executable, "-c", "import time; time.sleep(30)"]
        )
        return tmp_path

    monkeypatch.setattr(operatorrun, "start", start)
    try:
        operatorrun.ensure_running(plane, "mpi-operator")  # type: ignore[arg-type]
        operatorrun.ensure_running(plane, "mpi-operator")  # type: ignore[arg-type]
        assert started == ["mpi-operator"]  # running: left alone
        record = plane.supervisor.get("operator-mpi-operator")
        assert record is not None
        plane.supervisor.stop("operator-mpi-operator", timeout=5)  # it dies
        operatorrun.ensure_running(plane, "mpi-operator")  # type: ignore[arg-type]
        assert started == ["mpi-operator", "mpi-operator"]
        assert any("exited; starting it again" in line for line in plane.said)
    finally:
        plane.supervisor.stop_all(timeout=5)
