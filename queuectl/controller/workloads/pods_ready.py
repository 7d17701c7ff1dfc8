"""Admitted but not running: the startup and recovery timeouts (Kueue's waitForPodsReady).

An admitted gang whose pods never all start (an image that cannot be pulled, pods the
scheduler cannot place, a crash loop) would hold its GPUs for ever. So once its job runs, a
Workload must have every admitted pod Ready at once (`PodsReady=True`) within the startup
timeout, counted from its admission; a running one that loses a Ready pod (`PodsReady=False`,
reason PodsNotReady) must get it back within the recovery timeout. Either miss evicts it with
reason PodsReadyTimeout; it is requeued with exponential back-off (`requeueState`), and after
`requeue_limit` such requeues it is deactivated (reason RequeuingLimitExceeded) instead.

Ready is read from the pods themselves (`watch/workload_pods.py`), the same for every kind; a
kind may add the pods that already succeeded (`JobKind.succeeded_pods`: a Job's finished
completions), so a gang finishing one pod at a time never reads as broken.

This module decides; `reconcile.py` writes. Pure: the Workload, counts and the clock in, one
`Step` out.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from queuectl import convert
from queuectl.api import names
from queuectl.api.views import ObjectView, WorkloadView
from queuectl.controller.watch.kube import Obj

DEFAULT_TIMEOUT_S = 600.0
"""Startup: 10 minutes. A GPU image is often tens of GB and a node's first pull of it takes
minutes; a gang not up after 10 minutes is stuck, not slow, and every minute more idles all of
its GPUs."""
DEFAULT_RECOVERY_S = 300.0
"""Recovery: 5 minutes, time for a kubelet to restart a crashed container once or twice; a
collective (NCCL) gang with a rank gone makes no progress, so waiting longer only burns GPUs."""
DEFAULT_REQUEUE_LIMIT = 5
"""Requeues for PodsReadyTimeout before the Workload is deactivated: with the back-off below
that is about an hour of retries, enough to ride out a node or registry outage."""
DEFAULT_BACKOFF_BASE_S = 60.0
DEFAULT_BACKOFF_MAX_S = 3600.0


@dataclass(frozen=True)
class PodsReadyOptions:
    """The controller's defaults; a ClusterQueue's `spec.waitForPodsReady` overrides each."""

    timeout_s: float = DEFAULT_TIMEOUT_S
    """0: no pods-ready checks (unless a ClusterQueue sets its own timeout)."""
    recovery_s: float = DEFAULT_RECOVERY_S
    """0: a running gang that loses a Ready pod is left alone."""
    requeue_limit: int = DEFAULT_REQUEUE_LIMIT
    """0: requeued for ever."""
    backoff_base_s: float = DEFAULT_BACKOFF_BASE_S
    backoff_max_s: float = DEFAULT_BACKOFF_MAX_S
    block_admission: bool = False
    """All-or-nothing start: while a workload's pods are not yet all Ready, nothing else is
    admitted into its flavors (`core.starting`; the core applies it, a ClusterQueue may
    override it). PodsReady is written for it even with the timeouts off."""


def policy(options: PodsReadyOptions, cluster_queue: Obj | None) -> PodsReadyOptions:
    """The options that apply to a Workload of `cluster_queue`: its overrides, else ours."""
    spec = ObjectView(cluster_queue or {}).spec.get("waitForPodsReady") or {}
    if not isinstance(spec, Mapping):
        return options

    def pick(field: str, default: float) -> float:
        value = spec.get(field)
        return float(value) if isinstance(value, int | float) and value >= 0 else default

    return PodsReadyOptions(
        timeout_s=pick("timeoutSeconds", options.timeout_s),
        recovery_s=pick("recoveryTimeoutSeconds", options.recovery_s),
        requeue_limit=int(pick("requeueLimit", options.requeue_limit)),
        backoff_base_s=options.backoff_base_s,
        backoff_max_s=options.backoff_max_s,
        block_admission=(
            spec["blockAdmission"]
            if isinstance(spec.get("blockAdmission"), bool)
            else options.block_admission
        ),
    )


def admitted_pods(wl: Obj) -> int:
    """How many pods the admission covers (each pod set's admitted count)."""
    admission = WorkloadView(wl).admission or {}
    counts = [int(a.get("count") or 0) for a in admission.get("podSetAssignments") or ()]
    if counts and all(counts):
        return sum(counts)
    return sum(int(ps.get("count", 1)) for ps in WorkloadView(wl).pod_sets)


@dataclass(frozen=True)
class Step:
    """What to do now. `condition`: (status, reason, message) to write as PodsReady; `evict`:
    the eviction message (PodsReadyTimeout); `deactivate`: the requeue limit is reached;
    `check_at`: when to look again (nothing may happen in between: no pod event comes)."""

    condition: tuple[bool, str, str] | None = None
    evict: str | None = None
    deactivate: bool = False
    check_at: float | None = None


def step(wl: Obj, ready: int, rules: PodsReadyOptions, now: float) -> Step:
    """The pods-ready step of an admitted Workload whose job runs, with `ready` of its pods
    Ready or done. With the timeouts off but block admission on, PodsReady is still written
    (its flavors are held until it is True), with no clock."""
    if rules.timeout_s <= 0 and not rules.block_admission:
        return Step()
    view = WorkloadView(wl)
    admitted = view.condition(names.COND_ADMITTED) or {}
    since = convert.parse_time(admitted.get("lastTransitionTime"))
    if admitted.get("status") != "True" or since is None:
        return Step()
    need = admitted_pods(wl)
    cond = view.condition(names.COND_PODS_READY) or {}
    if ready >= need:
        if cond.get("status") == "True":
            return Step()
        return Step(condition=(True, names.REASON_PODS_READY, f"All {need} pods are Ready"))
    if rules.timeout_s <= 0:  # tracked for block admission only
        if cond.get("status") == "True":
            return Step(
                condition=(False, names.REASON_PODS_NOT_READY, f"{ready} of {need} pods Ready")
            )
        return Step()
    if cond.get("status") == "True":  # it ran, and lost one
        message = f"{ready} of {need} pods Ready"
        if rules.recovery_s <= 0:
            return Step(condition=(False, names.REASON_PODS_NOT_READY, message))
        return Step(
            condition=(False, names.REASON_PODS_NOT_READY, message),
            check_at=now + rules.recovery_s,
        )
    if cond.get("reason") == names.REASON_PODS_NOT_READY:  # waiting for it to recover
        lost = convert.parse_time(cond.get("lastTransitionTime")) or now
        if rules.recovery_s <= 0:
            return Step()
        if now < lost + rules.recovery_s:
            return Step(check_at=lost + rules.recovery_s)
        what = (
            f"only {ready} of its {need} pods Ready for {rules.recovery_s:g} s after one "
            "stopped being Ready (recovery timeout)"
        )
        return _timed_out(wl, what, rules)
    if now < since + rules.timeout_s:  # starting
        return Step(check_at=since + rules.timeout_s)
    what = (
        f"only {ready} of its {need} pods Ready {rules.timeout_s:g} s after admission "
        "(startup timeout)"
    )
    return _timed_out(wl, what, rules)


def _timed_out(wl: Obj, what: str, rules: PodsReadyOptions) -> Step:
    requeues = requeue_count(WorkloadView(wl).status)
    if rules.requeue_limit and requeues >= rules.requeue_limit:
        return Step(
            evict=(
                f"Deactivated: {what}, after {requeues} requeues for "
                f"{names.REASON_EVICTED_PODS_READY_TIMEOUT} (limit {rules.requeue_limit}). "
                "Find out why its pods do not start or stay Ready (kubectl describe on its "
                "pods: image pulls, scheduling, crashes), fix it, then set spec.active: true "
                "on the Workload to queue it again"
            ),
            deactivate=True,
        )
    return Step(
        evict=(
            f"Pods not Ready: {what}; quota released, requeued with back-off "
            f"({requeues + 1} of at most {rules.requeue_limit or 'unlimited'} requeues)"
        )
    )


def requeue_count(status: Mapping[str, Any]) -> int:
    return int((status.get("requeueState") or {}).get("count") or 0)
