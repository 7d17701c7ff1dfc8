"""The flags of `queuectl controller`, apart from what it runs (`cli/controller.py`)."""

from __future__ import annotations

import argparse
import os

from queuectl.api import names
from queuectl.cli._numbers import FAIR_RULES, PORT, fair_rules, real, seconds, whole
from queuectl.controller.nodes import drain
from queuectl.controller.watch.kinds import RECHECK_S
from queuectl.controller.workloads import pods_ready
from queuectl.core import DEFAULT_PATIENCE_SECONDS


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--kubeconfig",
        help="out-of-cluster: the cluster's kubeconfig (default: the in-cluster service account)",
    )
    p.add_argument(
        "--webhook-host",
        default="127.0.0.1",
        help="address the webhook server binds (0.0.0.0 in a pod)",
    )
    p.add_argument("--webhook-port", type=PORT, default=names.WEBHOOK_PORT, help="0: any free port")
    p.add_argument(
        "--visibility-port",
        type=PORT,
        default=names.VISIBILITY_PORT,
        help="the visibility API's HTTPS port, on --webhook-host (0: any free port)",
    )
    p.add_argument(
        "--register-visibility",
        action="store_true",
        help="out of cluster: register the visibility APIService pointing at this process on "
        "127.0.0.1 (removed again on a clean stop)",
    )
    p.add_argument("--health-port", type=PORT, default=8081, help="0: any free port")
    p.add_argument("--metrics-port", type=PORT, default=8080, help="0: any free port")
    p.add_argument(
        "--bind-host",
        default="127.0.0.1",
        help="address of /healthz, /readyz and /metrics unless the two flags below say otherwise",
    )
    p.add_argument("--health-host", help="address of /healthz and /readyz (default: --bind-host)")
    p.add_argument("--metrics-host", help="address of /metrics (default: --bind-host)")
    p.add_argument(
        "--leader-elect",
        action="store_true",
        help="take part in Lease leader election (several replicas)",
    )
    p.add_argument(
        "--register-webhooks",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="write webhook configurations pointing at https://127.0.0.1:PORT "
        "(default: on with --kubeconfig)",
    )
    p.add_argument(
        "--install-crds",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="apply queuectl's CRDs at start (default: on with --kubeconfig)",
    )
    p.add_argument(
        "--impersonate",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="act as the controller's service account through the kubeconfig's "
        "user, so the webhooks tell its writes apart (default: on with --kubeconfig)",
    )
    p.add_argument(
        "--cert-mode",
        choices=["self", "external"],
        default="self",
        help="self: manage the CA and serving certificate (Secret + caBundle); "
        "external: serve the certificate files found in --cert-dir (cert-manager)",
    )
    p.add_argument("--cert-dir", help="where the serving certificate files are written")
    p.add_argument(
        "--namespace",
        help="namespace queuectl is installed in: the certificate Secret, the Lease and the "
        "controller's ServiceAccount (default: in-cluster $POD_NAMESPACE, else "
        f"{names.SYSTEM_NAMESPACE})",
    )
    p.add_argument(
        "--controller-user",
        default=os.environ.get("QUEUECTL_CONTROLLER_USER") or None,
        help="the controller's username, whose Job and Workload writes the webhooks trust "
        "(default: $QUEUECTL_CONTROLLER_USER, else "
        "system:serviceaccount:NAMESPACE:queuectl-controller)",
    )
    p.add_argument(
        "--auto-drain",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="cordon a node whose GPU agent reports an unhealthy GPU and evict its workloads "
        "(reason NodeFailures) so they are re-admitted elsewhere (default: on)",
    )
    p.add_argument(
        "--drain-max-share",
        type=real(0.0, 1.0, above_low=True, says="a fraction, more than 0, at most 1"),
        default=0.25,
        help="most of a flavor's nodes drained at once, as a fraction (at least one node)",
    )
    p.add_argument(
        "--node-failure-seconds",
        type=seconds(zero="never drain a node for not being Ready"),
        default=drain.NODE_FAILURE_S,
        help="with --auto-drain, a node not Ready or unreachable this long is drained like a "
        "node with a bad GPU (its pods stuck terminating there are force-deleted); 0: off "
        f"(default: {drain.NODE_FAILURE_S:g}, as long as Kubernetes leaves pods on such a node)",
    )
    p.add_argument(
        "--agent-silence-seconds",
        type=seconds(zero="never mark GPUs unknown"),
        default=drain.AGENT_SILENCE_S,
        help="a node whose GPU agent has not refreshed its GPUHealthy heartbeat this long is "
        "tainted gpu.queuectl.io/unknown (nothing new lands there; nothing is evicted); 0: off "
        f"(default: {drain.AGENT_SILENCE_S:g}, two missed heartbeats)",
    )
    p.add_argument(
        "--job-kind",
        action="append",
        metavar="MODULE:ATTRIBUTE",
        help="also queue this job kind (a queuectl.jobs.JobKind importable here); repeatable",
    )
    p.add_argument(
        "--job-kind-recheck-seconds",
        type=seconds(minimum=1.0),
        default=RECHECK_S,
        help="how often a job kind whose CRD is not installed is looked for again "
        f"(default: {RECHECK_S:.0f})",
    )
    p.add_argument(
        "--preemption-patience-seconds",
        type=seconds(zero="preempt at once"),
        default=DEFAULT_PATIENCE_SECONDS,
        help="how long a workload that would preempt waits instead while finished work in its "
        "cohort keeps returning the quota it lacks; 0 preempts at once "
        f"(default: {DEFAULT_PATIENCE_SECONDS:g})",
    )
    p.add_argument(
        "--fair-sharing-preemption",
        type=fair_rules,
        default=(),
        metavar="RULES",
        help="with fair sharing, let a queue below its weighted share preempt equal-priority "
        "work of queues above theirs, by these rules, comma-separated, in order: "
        f"{FAIR_RULES} (Kueue's default), or either one alone; off when not given",
    )
    p.add_argument(
        "--pods-ready-timeout-seconds",
        type=seconds(zero="no startup timeout"),
        default=pods_ready.DEFAULT_TIMEOUT_S,
        help="an admitted workload whose pods are not all Ready this long after admission is "
        "evicted (PodsReadyTimeout) and requeued with back-off; 0: off unless a ClusterQueue "
        f"sets spec.waitForPodsReady (default: {pods_ready.DEFAULT_TIMEOUT_S:g})",
    )
    p.add_argument(
        "--pods-ready-recovery-seconds",
        type=seconds(zero="no recovery timeout"),
        default=pods_ready.DEFAULT_RECOVERY_S,
        help="a running workload that lost a Ready pod and has not got it back this long "
        f"after is evicted the same way; 0: off (default: {pods_ready.DEFAULT_RECOVERY_S:g})",
    )
    p.add_argument(
        "--pods-ready-requeue-limit",
        type=whole(0),
        default=pods_ready.DEFAULT_REQUEUE_LIMIT,
        help="requeues for PodsReadyTimeout before the workload is deactivated instead; "
        f"0: no limit (default: {pods_ready.DEFAULT_REQUEUE_LIMIT})",
    )
    p.add_argument(
        "--pods-ready-backoff-base-seconds",
        type=seconds(minimum=1.0),
        default=pods_ready.DEFAULT_BACKOFF_BASE_S,
        help="back-off before such a workload may be admitted again, doubling per requeue "
        f"(default: {pods_ready.DEFAULT_BACKOFF_BASE_S:g})",
    )
    p.add_argument(
        "--pods-ready-backoff-max-seconds",
        type=seconds(minimum=1.0),
        default=pods_ready.DEFAULT_BACKOFF_MAX_S,
        help=f"the longest such back-off (default: {pods_ready.DEFAULT_BACKOFF_MAX_S:g})",
    )
    p.add_argument(
        "--pods-ready-block-admission",
        action="store_true",
        help="all-or-nothing start: while an admitted workload's pods are not yet all Ready, "
        "admit nothing else into its flavors (other flavors go on), so two half-started gangs "
        "never hold each other's nodes; the startup timeout bounds the wait; a ClusterQueue's "
        "spec.waitForPodsReady.blockAdmission overrides it (default: off)",
    )
    p.add_argument(
        "--kueue-queue-label",
        action="store_true",
        help=f"also queue new jobs labelled {names.LABEL_KUEUE_QUEUE_NAME} (as if labelled "
        f"{names.LABEL_QUEUE_NAME}; refused when the two disagree), for teams moving from "
        "Kueue; only where Kueue no longer manages those jobs",
    )
    p.add_argument("--log-level", default="info")
