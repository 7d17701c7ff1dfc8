"""e2e on the real install (issue 13 item 5): the kustomize base as shipped, its 2-replica
controller Deployment running in the real node's containerd, Jobs admitted through it.

- Jobs created through the API server are queued by the in-cluster webhooks and admitted by
  the in-cluster leader;
- on the real node: a Job whose image cannot be pulled frees its quota (pods-ready timeout);
  the trainer sample checkpoints on its preemption notice (the annotation, in its downward-API
  file) before the deadline and is stopped no earlier than it;
- the leader pod is deleted: the other replica takes the Lease and admits within 20 s, and no
  Workload is admitted twice (the invariant sampler watches throughout); the failover time is
  printed as `failover: ...` (run with -s to see it);
- `kubectl rollout restart` while Jobs keep arriving: none refused, every one created
  suspended with its queue label, every one eventually admitted;
- uninstall (`kubectl delete -k`) leaves no webhook configuration behind: a plain Job and a
  labelled Job are created afterwards.
"""

from __future__ import annotations

import json
import shutil
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from e2e.harness import apply, cluster_queue, flavor, gpu_job, local_queue, priority_class
from e2e.jobflow import JobFlow
from e2e.real_install_objects import (
    NOTICE_GRACE_S,
    cpu_job,
    cpu_queue,
    job_annotations,
    lines,
    pods,
    real_node_flavor,
    trainer_sample,
    workload_condition,
)
from queuectl.api import names
from queuectl.convert import parse_time
from queuectl.testenv import eventually
from queuectl.testenv.invariants import Sampler
from queuectl.testenv.nodes import H100
from queuectl.testenv.realinstall import BASE, NAMESPACE, RealInstall, real_install

pytestmark = [pytest.mark.cluster, pytest.mark.real_node]

TEAM = "team-install"
FAILOVER_BOUND_S = 20.0


@pytest.fixture(scope="module")
def install(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RealInstall]:
    with real_install(tmp_path_factory.mktemp("install-e2e"), BASE) as installed:
        installed.wait_ready(2, timeout=300)
        installed.plane.kubectl("create", "namespace", TEAM)
        apply(
            installed.plane,
            flavor("h100", H100),
            cluster_queue("cq-install", TEAM, {"h100": 16}),
            local_queue("lq", TEAM, "cq-install"),
        )
        yield installed


@pytest.fixture
def sampler(install: RealInstall) -> Iterator[Sampler]:
    api = install.plane.api_client()
    watching = Sampler(api, [TEAM], interval=0.5).start()
    try:
        yield watching
    finally:
        watching.stop()
        api.close()  # type: ignore[no-untyped-call]


def jobs(install: RealInstall) -> dict[str, dict[str, object]]:
    out = install.plane.kubectl("get", "jobs", "-n", TEAM, "-o", "json").stdout
    return {j["metadata"]["name"]: j["spec"] for j in json.loads(out)["items"]}


def wait_admitted(install: RealInstall, names: set[str], timeout: float = 300) -> None:
    eventually(
        lambda: {n for n, spec in jobs(install).items() if n in names and not spec["suspend"]},
        lambda done: done == names,
        timeout=timeout,
        what=f"{len(names)} Jobs admitted",
    )


def test_jobs_are_queued_and_admitted_through_the_in_cluster_deployment(
    install: RealInstall,
) -> None:
    names = {f"first-{i}" for i in range(3)}
    apply(install.plane, *(gpu_job(n, TEAM, "lq", gpus=1, runs_for="1s") for n in names))
    wait_admitted(install, names, timeout=120)


def test_a_job_whose_image_cannot_be_pulled_frees_its_quota_and_the_next_job_runs(
    install: RealInstall,
) -> None:
    """On the real node: a Job's image exists nowhere (ImagePullBackOff); its ClusterQueue's
    15-second pods-ready timeout evicts it, requeued with back-off, and the Job waiting behind
    it for the queue's CPU runs."""
    team = "team-image"
    install.plane.kubectl("create", "namespace", team)
    cpu = "100m"
    apply(
        install.plane,
        real_node_flavor(),
        cpu_queue("cq-image", team, cpu, waitForPodsReady={"timeoutSeconds": 15}),
        local_queue("lq", team, "cq-image"),
    )
    image = install.controller_pods()[0]["spec"]["containers"][0]["image"]  # on the node
    apply(
        install.plane,
        cpu_job("missing", team, "localhost/queuectl/missing:v1", cpu, pull="IfNotPresent"),
        cpu_job("next", team, image, cpu, pull="Never"),
    )
    eventually(
        lambda: [
            s.get("state", {}).get("waiting", {}).get("reason")
            for p in pods(install, team, "missing")
            for s in (p.get("status") or {}).get("containerStatuses") or ()
        ],
        lambda reasons: bool({"ErrImagePull", "ImagePullBackOff"} & set(reasons)),
        timeout=120,
        what="the missing image's pull failing on the real node",
    )
    requeued = eventually(
        lambda: workload_condition(install, team, "missing", names.COND_REQUEUED),
        lambda cond: cond.get("reason") == names.REASON_EVICTED_PODS_READY_TIMEOUT,
        timeout=120,
        what="missing evicted for PodsReadyTimeout and requeued",
    )
    assert "backing off until" in requeued["message"]
    eventually(
        lambda: [p["status"].get("phase") for p in pods(install, team, "next") if p.get("status")],
        lambda phases: "Running" in phases,
        timeout=120,
        what="next running on the real node",
    )


def test_a_preempted_trainer_checkpoints_on_its_notice_and_runs_until_the_deadline(
    install: RealInstall,
) -> None:
    """On the real node, the trainer sample (config/samples/32-preemption-notice.yaml) in the
    local image, its checkpoints on a host directory: a higher-priority Job preempts it with a
    30-second grace period. The notice reaches its running pod (the annotation, then the
    downward-API file): the container writes its checkpoint before the deadline and is stopped
    no earlier than the deadline. Once the preemptor is done the trainer is admitted again; its
    new pod carries no notice and resumes from the checkpoint."""
    team, cpu = "team-notice", "100m"
    install.plane.kubectl("create", "namespace", team)
    apply(
        install.plane,
        real_node_flavor(),
        cpu_queue("cq-notice", team, cpu, preemption={"withinClusterQueue": "LowerPriority"}),
        local_queue("lq", team, "cq-notice"),
        priority_class("low-notice", 10, grace=NOTICE_GRACE_S),
        priority_class("high-notice", 1000),
    )
    image = install.controller_pods()[0]["spec"]["containers"][0]["image"]  # on the node
    ckpt = Path(tempfile.mkdtemp(prefix="queuectl-notice-"))
    ckpt.chmod(0o777)  # the image runs as a non-root user
    log = ckpt / "log"
    try:
        apply(install.plane, trainer_sample(team, image, cpu, ckpt, "low-notice"))
        eventually(lambda: lines(log), bool, timeout=120, what="the trainer running")
        preemptor: dict[str, Any] = cpu_job("preemptor", team, image, cpu, pull="Never")
        preemptor["metadata"]["labels"][names.LABEL_PRIORITY_CLASS] = "high-notice"
        preemptor["spec"]["template"]["spec"]["containers"][0]["command"] = ["sleep", "5"]
        apply(install.plane, preemptor)
        stamp = eventually(
            lambda: job_annotations(install, team, "checkpointing-train").get(
                names.ANNOTATION_PREEMPTION_DEADLINE
            ),
            bool,
            timeout=60,
            what="the trainer preempted",
        )
        deadline = parse_time(stamp)
        assert deadline is not None
        eventually(  # on the running pod itself
            lambda: [
                (p["metadata"].get("annotations") or {}).get(names.ANNOTATION_PREEMPTION_DEADLINE)
                for p in pods(install, team, "checkpointing-train")
            ],
            lambda notes: notes == [stamp],
            timeout=30,
            what="the notice on the trainer's pod",
        )
        told = eventually(
            lambda: [ln for ln in lines(log) if f"notice until {stamp}" in ln],
            bool,
            timeout=NOTICE_GRACE_S + 30,
            what="the trainer seeing its notice in /etc/queuectl/annotations",
        )
        assert int(told[0].split()[0]) < deadline  # checkpointed before the deadline
        step = (ckpt / "step").read_text().strip()
        assert told[0].endswith(f"checkpoint at step {step}")
        stopped = eventually(
            lambda: [ln for ln in lines(log) if "stopped at step" in ln],
            bool,
            timeout=NOTICE_GRACE_S + 60,
            what="the trainer stopped (SIGTERM)",
        )
        assert int(stopped[0].split()[0]) >= deadline - 1  # its grace period honoured
        resumed = eventually(
            lambda: [ln for ln in lines(log) if "resuming at step" in ln][1:],
            bool,
            timeout=180,
            what="the trainer admitted again after the preemptor, resuming",
        )
        assert resumed[0].endswith(f"resuming at step {step}")
        running = [
            p for p in pods(install, team, "checkpointing-train") if p["spec"].get("nodeName")
        ]
        assert running and all(
            names.ANNOTATION_PREEMPTION_DEADLINE not in (p["metadata"].get("annotations") or {})
            for p in running
        )
    finally:
        install.plane.kubectl("delete", "namespace", team, "--wait=false", check=False)
        shutil.rmtree(ckpt, ignore_errors=True)


def test_deleting_the_leader_pod_the_other_replica_admits_within_20s_and_nothing_twice(
    install: RealInstall, sampler: Sampler
) -> None:
    install.wait_ready(2)
    leader = eventually(install.lease_holder, bool, timeout=60, what="a Lease holder")
    assert leader in install.ready_pods()
    flow = JobFlow(install.plane, TEAM, "lq", "failover").start()
    try:
        time.sleep(3)
        deleted_at = time.monotonic()
        install.plane.kubectl("delete", "pod", leader, "-n", NAMESPACE, "--wait=false")
        successor = eventually(
            install.lease_holder, lambda h: bool(h) and h != leader, timeout=60,
            what="another replica holding the Lease",
        )  # fmt: skip
        took_lease = time.monotonic()
        admitted_at = eventually(
            lambda: sampler.history.first_admission_after(took_lease),
            lambda t: t is not None,
            timeout=60,
            what="an admission by the new leader",
        )
        assert admitted_at is not None
    finally:
        flow.stop()
    failover = admitted_at - deleted_at
    print(
        f"\nfailover: leader {leader} deleted -> {successor} held the Lease after "
        f"{took_lease - deleted_at:.1f}s, admitted after {failover:.1f}s"
    )
    assert successor != leader
    assert failover <= FAILOVER_BOUND_S
    assert flow.refused == []
    wait_admitted(install, set(flow.created))
    assert sampler.history.double_admitted == set()
    assert sampler.findings() == []


def test_a_rollout_restart_while_jobs_arrive_refuses_none_and_loses_none(
    install: RealInstall, sampler: Sampler
) -> None:
    install.wait_ready(2)
    flow = JobFlow(install.plane, TEAM, "lq", "rollout").start()
    try:
        time.sleep(3)
        ns = ["-n", NAMESPACE]
        install.plane.kubectl("rollout", "restart", "deployment/queuectl-controller", *ns)
        install.plane.kubectl(
            "rollout", "status", "deployment/queuectl-controller", *ns, "--timeout=420s",
            timeout=450,
        )  # fmt: skip
        time.sleep(5)
    finally:
        flow.stop()
    assert flow.refused == []
    assert len(flow.created) >= 10, "too few Jobs were created to show anything"
    assert flow.not_queued() == []
    wait_admitted(install, set(flow.created))
    assert sampler.history.double_admitted == set()
    assert sampler.findings() == []


def test_uninstall_leaves_no_webhook_configuration_that_blocks_the_cluster(
    install: RealInstall,
) -> None:
    install.plane.kubectl("delete", "-k", str(install.overlay), "--wait=true", timeout=600)
    for kind in ("mutatingwebhookconfigurations", "validatingwebhookconfigurations"):
        left = json.loads(install.plane.kubectl("get", kind, "-o", "json").stdout)["items"]
        assert [o["metadata"]["name"] for o in left if "queuectl" in o["metadata"]["name"]] == []
    plain = gpu_job("plain-after-uninstall", "default", "lq", gpus=1)
    del plain["metadata"]["labels"]
    labelled = gpu_job("labelled-after-uninstall", "default", "lq", gpus=1)
    apply(install.plane, plain, labelled)  # raises if any webhook refused them
