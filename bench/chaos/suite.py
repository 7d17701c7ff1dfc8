"""The chaos scenarios: each runs a stream of GPU Jobs through a fault and returns its figures.

One `Suite` holds a control plane, the fault proxy in front of its API server, the controller
replicas (which reach the API server only through the proxy; the API server calls their
webhooks directly) and a kubelet-like watchdog that restarts a replica that exits. Every
scenario gets its own namespace and ClusterQueue, its own invariant sampler, and ends by
waiting for every Job the stream created to complete: one that does not is lost.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from kubernetes.client.exceptions import ApiException

from bench.chaos import bypass, hostile
from bench.chaos.world import (
    JobStream,
    Kubelet,
    Replica,
    Rest,
    make_queue,
    unfinished_jobs,
)
from queuectl.api import names
from queuectl.testenv.cluster import Cluster
from queuectl.testenv.controlplane import ControlPlane
from queuectl.testenv.faultproxy import (
    Mode,
    ProxyThread,
    proxy_for_kubeconfig,
    status_writes,
)
from queuectl.testenv.invariants import Sampler
from queuectl.testenv.kubeconfig import write_proxied_kubeconfig


@dataclass(frozen=True)
class Size:
    """How big each scenario is: `FULL` for `python -m bench chaos`, `CI` for the e2e module."""

    quota_gpus: int = 8
    stream_interval: float = 1.0
    job_runs_for: str = "2s"
    warmup_s: float = 5.0
    reset_s: float = 10.0
    blackhole_s: float = 30.0
    write_fault_s: float = 10.0
    watch_min_s: float = 10.0
    watch_max_s: float = 40.0
    drain_s: float = 180.0
    hostile: int = 2000
    slow_bodies: int = 20
    slow_patience_s: float = 30.0


FULL = Size()
CI = Size(
    reset_s=5.0, blackhole_s=12.0, write_fault_s=6.0, warmup_s=3.0, watch_min_s=6.0, drain_s=90.0
)
RESUME_TARGET_S = 20.0


@dataclass
class Figures:
    """One row of the table."""

    scenario: str
    faults: int
    violations: list[str] = field(default_factory=list)
    jobs_lost: list[str] = field(default_factory=list)
    double_admissions: list[str] = field(default_factory=list)
    resume_s: float | None = None  # None: admissions never resumed (or not measured)
    measures_resume: bool = True
    refused: list[str] = field(default_factory=list)
    replica_exits: int = 0  # controller processes that ended (killed, or on their own)
    notes: str = ""

    def resume_text(self) -> str:
        if not self.measures_resume:
            return "-"
        return "never" if self.resume_s is None else f"{self.resume_s:.1f}"


def table(rows: list[Figures]) -> str:
    head = [
        "scenario",
        "faults",
        "violations",
        "lost",
        "double",
        "resume-s",
        "refused",
        "exits",
        "notes",
    ]
    lines = [
        [
            r.scenario,
            str(r.faults),
            str(len(r.violations)),
            str(len(r.jobs_lost)),
            str(len(r.double_admissions)),
            r.resume_text(),
            str(len(r.refused)),
            str(r.replica_exits),
            r.notes,
        ]
        for r in rows
    ]
    widths = [max(len(x) for x in col) for col in zip(head, *lines, strict=False)]
    fmt = "  ".join(f"{{:<{w}}}" for w in widths)
    out = [fmt.format(*head), fmt.format(*("-" * w for w in widths))]
    out += [fmt.format(*line) for line in lines]
    return "\n".join(out)


Inject = Callable[["Suite"], tuple[int, float]]
"""Injects a fault; returns (faults injected, monotonic time the fault ended)."""


class Suite:
    def __init__(self, cluster: Cluster, work_dir: Path, size: Size = CI) -> None:
        self.cluster = cluster
        self.work_dir = work_dir
        self.size = size
        self.api = cluster.api_client()
        self.rest = Rest(self.api)
        self.proxy: ProxyThread = proxy_for_kubeconfig(cluster.kubeconfig)
        self.kubeconfig = str(
            write_proxied_kubeconfig(
                cluster.kubeconfig, work_dir / "proxied.kubeconfig", self.proxy.address
            )
        )
        self.replicas = [Replica("a", self.kubeconfig, work_dir)]
        self.kubelet = Kubelet(self.replicas)
        self.apiserver_down_s = 0.0
        """How long the last in-place restart of kube-apiserver took (stop to ready)."""

    def start(self) -> Suite:
        self.replicas[0].start(wait_leading=True)
        self.kubelet.start()
        return self

    def close(self) -> None:
        self.kubelet.stop()
        for r in self.replicas:
            r.stop()
        self.proxy.stop()
        for kind, name in (
            ("mutatingwebhookconfigurations", names.MUTATING_WEBHOOK_CONFIGURATION),
            ("validatingwebhookconfigurations", names.VALIDATING_WEBHOOK_CONFIGURATION),
        ):
            try:  # a stopped controller leaves Fail-policy webhooks at a dead port
                path = f"/apis/admissionregistration.k8s.io/v1/{kind}/{name}"
                self.rest.call("DELETE", path)
            except ApiException:
                pass
        self.api.close()  # type: ignore[no-untyped-call]

    # ---- helpers -----------------------------------------------------------------------
    def leader(self, timeout: float = 120.0) -> Replica:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for r in self.replicas:
                if r.running() and r.leading():
                    return r
            time.sleep(0.3)
        tails = "\n".join(f"--- {r.name}\n{r.log_tail()}" for r in self.replicas)
        raise RuntimeError(f"no replica leads after {timeout}s\n{tails}")

    def fault_count(self) -> int:
        return self.proxy.stats().total_faults()

    def namespace(self, scenario: str) -> str:
        return f"chaos-{scenario}-{uuid.uuid4().hex[:5]}"

    # ---- the stream scenarios ----------------------------------------------------------
    def run_stream(self, scenario: str, inject: Inject, *, notes: str = "") -> Figures:
        self.leader()
        self.proxy.heal()
        size = self.size
        restarts = self.kubelet.restarts
        queue = make_queue(self.rest, self.namespace(scenario), size.quota_gpus)
        sampler = Sampler(self.api, [queue.namespace]).start()
        stream = JobStream(
            self.rest, queue, interval=size.stream_interval, runs_for=size.job_runs_for
        ).start()
        try:
            started = time.monotonic()
            time.sleep(size.warmup_s)
            while not sampler.history.first_admitted and time.monotonic() - started < 90:
                time.sleep(0.5)  # the stream flows before the fault
            faults, ended = inject(self)
            while time.monotonic() - ended < size.watch_max_s:
                resumed = sampler.history.first_admission_after(ended)
                if resumed is not None and time.monotonic() - ended >= size.watch_min_s:
                    break
                time.sleep(0.5)
            stream.stop()
            deadline = time.monotonic() + size.drain_s
            lost = unfinished_jobs(self.rest, queue.namespace, stream.created)
            while lost and time.monotonic() < deadline:
                time.sleep(1.0)
                lost = unfinished_jobs(self.rest, queue.namespace, stream.created)
        finally:
            stream.stop()
            sampler.stop()
        resumed = sampler.history.first_admission_after(ended)
        return Figures(
            scenario=scenario,
            faults=faults,
            violations=sampler.findings(),
            jobs_lost=lost,
            double_admissions=sorted(sampler.history.double_admitted),
            resume_s=None if resumed is None else resumed - ended,
            refused=[f"{r.status} {r.reason}" for r in stream.refused],
            replica_exits=self.kubelet.restarts - restarts,
            notes=(
                notes + f" created={len(stream.created)} unreachable={stream.unreachable}"
                f" samples={sampler.samples}/{sampler.samples + sampler.errors}"
            ).strip(),
        )


# ---- the faults ---------------------------------------------------------------------------------
def kill_leader(suite: Suite) -> tuple[int, float]:
    """SIGKILL the only replica mid-stream; the watchdog restarts it in its pod (same name)."""
    suite.leader().kill()
    return 1, time.monotonic()


def kill_leader_of_two(suite: Suite) -> tuple[int, float]:
    """A second replica follows; the leader's node is lost (SIGKILL, and no restart in place),
    so the follower must wait out the Lease and take over; then the leader comes back as a
    replacement pod with a new name, which follows."""
    leader = suite.leader()
    second = next((r for r in suite.replicas if r is not leader), None)
    if second is None:
        second = Replica(f"r{len(suite.replicas)}", suite.kubeconfig, suite.work_dir)
        suite.replicas.append(second)
    if not second.running():
        second.start(wait_leading=False)  # registers the webhooks last: they stay served
    suite.kubelet.paused.add(leader.name)
    leader.kill()
    killed = time.monotonic()
    try:
        suite.leader()  # only the follower can lead now
    finally:
        leader.replace_pod()
        suite.kubelet.paused.discard(leader.name)
    return 1, killed


def restart_apiserver(suite: Suite) -> tuple[int, float]:
    if not isinstance(suite.cluster, ControlPlane):
        raise TypeError(
            "restarting kube-apiserver needs a control plane this process started "
            "(unset QUEUECTL_KUBECONFIG)"
        )
    started = time.monotonic()
    suite.cluster.restart_process("kube-apiserver")
    suite.apiserver_down_s = time.monotonic() - started
    return 1, time.monotonic()


def proxy_mode(mode: Mode, seconds: Callable[[Size], float]) -> Inject:
    def inject(suite: Suite) -> tuple[int, float]:
        before = suite.fault_count()
        suite.proxy.set_mode(mode)
        time.sleep(seconds(suite.size))
        faults = suite.fault_count() - before
        suite.proxy.heal()
        return max(faults, 1), time.monotonic()

    return inject


def failing_admission_writes(mode: Mode, *, forward: bool = False) -> Inject:
    """PATCH/PUT of workloads/status fail (by `mode`) for `write_fault_s`."""

    def inject(suite: Suite) -> tuple[int, float]:
        before = suite.fault_count()
        suite.proxy.set_rules([status_writes("workloads", mode, forward=forward)])
        time.sleep(suite.size.write_fault_s)
        suite.proxy.heal()
        return suite.fault_count() - before, time.monotonic()

    return inject


STREAM_SCENARIOS: dict[str, tuple[Inject, str]] = {
    "controller-sigkill": (kill_leader, "one replica, SIGKILL, restarted in its pod"),
    "leader-sigkill-of-two": (kill_leader_of_two, "two replicas, the leader's node lost"),
    "apiserver-restart": (restart_apiserver, "kube-apiserver restarted in place"),
    "connections-reset": (proxy_mode(Mode.RESET, lambda s: s.reset_s), "RST every connection"),
    "connections-dropped": (
        proxy_mode(Mode.DROP, lambda s: s.reset_s),
        "FIN every connection (aiohttp: ServerDisconnectedError)",
    ),
    "blackhole": (proxy_mode(Mode.BLACKHOLE, lambda s: s.blackhole_s), "nothing flows"),
    "admission-write-timeout": (
        failing_admission_writes(Mode.BLACKHOLE),
        "workloads/status writes never answered",
    ),
    "admission-write-reset": (
        failing_admission_writes(Mode.RESET),
        "workloads/status writes reset before the server",
    ),
    "admission-write-answer-lost": (
        failing_admission_writes(Mode.RESET, forward=True),
        "workloads/status writes applied, answer reset",
    ),
}


# ---- hostile webhook input, with the stream running ------------------------------------------
def hostile_reviews(suite: Suite) -> Figures:
    size = suite.size
    leader = suite.leader()
    restarts = suite.kubelet.restarts
    queue = make_queue(suite.rest, suite.namespace("hostile"), size.quota_gpus)
    sampler = Sampler(suite.api, [queue.namespace]).start()
    stream = JobStream(suite.rest, queue, interval=size.stream_interval).start()
    try:
        result = hostile.send(
            leader.webhook_port, size.hostile, size.slow_bodies, size.slow_patience_s
        )
        stream.stop()
        lost = unfinished_jobs(suite.rest, queue.namespace, stream.created)
        deadline = time.monotonic() + size.drain_s
        while lost and time.monotonic() < deadline:
            time.sleep(1.0)
            lost = unfinished_jobs(suite.rest, queue.namespace, stream.created)
    finally:
        stream.stop()
        sampler.stop()
    violations = sampler.findings()
    violations += [f"internal error on {e}" for e in result.internal_errors]
    violations += [f"slow body held > {size.slow_patience_s:.0f}s"] * result.slow_held
    statuses = " ".join(f"{k}:{v}" for k, v in sorted(result.statuses.items()))
    closed = max(result.slow_closed_after, default=0.0)
    return Figures(
        scenario="hostile-admission-reviews",
        faults=result.sent + result.slow_sent,
        violations=violations,
        jobs_lost=lost,
        double_admissions=sorted(sampler.history.double_admitted),
        measures_resume=False,
        refused=[f"{r.status} {r.reason}" for r in stream.refused],
        replica_exits=suite.kubelet.restarts - restarts,
        notes=f"http {statuses} transport-errors={result.transport_errors} "
        f"slow: {result.slow_held} held, closed within {closed:.1f}s",
    )


# ---- bypass attempts -----------------------------------------------------------------------------
def bypass_attempts(suite: Suite) -> Figures:
    suite.leader()
    restarts = suite.kubelet.restarts
    result = bypass.attempt_bypasses(
        suite.rest, suite.api, suite.namespace("bypass"), suite.size.drain_s
    )
    outcome = " ".join(
        f"{what}={'refused' if said.startswith('refused') else 'accepted'}"
        for what, said in result.attempts.items()
    )
    return Figures(
        scenario="bypass-attempts",
        faults=len(result.attempts),
        violations=result.violations + result.disagreements,
        jobs_lost=result.lost,
        double_admissions=result.double,
        measures_resume=False,
        replica_exits=suite.kubelet.restarts - restarts,
        notes=outcome,
    )


def run_all(suite: Suite, only: set[str] | None = None) -> list[Figures]:
    """Every scenario (or those named in `only`), in the issue's order."""
    rows = []
    for name, (inject, notes) in STREAM_SCENARIOS.items():
        if only is None or name in only:
            rows.append(suite.run_stream(name, inject, notes=notes))
    if only is None or "hostile-admission-reviews" in only:
        rows.append(hostile_reviews(suite))
    if only is None or "bypass-attempts" in only:
        rows.append(bypass_attempts(suite))
    return rows
