"""The workload operators queuectl queues (JobSet, LWS, KubeRay, Kubeflow), as real processes.

Each is built from its own Go module at a pinned release, once, into the testenv cache (keyed
by module, version and build flags), its CRDs are applied from that module's own manifests, and
it runs against the local control plane like kube-controller-manager (operatorbuild builds,
operatorrun installs and starts).

This module is the table: how each is run (flags, what is switched off and why) is in OPERATORS
below and in docs/design/testenv.md.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from queuectl.testenv import karpenter, mpioperator, trainingoperator
from queuectl.testenv.cluster import Cluster
from queuectl.testenv.errors import TestEnvError
from queuectl.testenv.operatorargs import HOST, RunDir, kubebuilder_config
from queuectl.testenv.trainingoperator import (
    TRAINING_OPERATOR_NAMESPACE,
    TRAINING_OPERATOR_SCHEMES,
    TRAINING_OPERATOR_SECRET,
)


class UnknownOperator(TestEnvError):
    """An operator name that is not in the table."""


@dataclass(frozen=True)
class Operator:
    """One operator: where its code is, which CRDs it owns and how it is run."""

    name: str
    module: str
    version: str
    package: str  # the main package, inside `module`
    crds: tuple[str, ...]  # globs relative to the module's root
    argv: Callable[[Path, RunDir], list[str]]  # (binary, run dir) -> command line
    notes: str  # what is switched off and why (docs/design/testenv.md says the same)
    go_directive: str = "1.25.0"
    needs_crds_of: tuple[str, ...] = ()  # other operators whose CRDs it watches
    env: dict[str, str] = field(default_factory=dict)
    prepare: Callable[[Cluster], None] | None = None  # objects it expects before starting
    # What a kubelet would do for it once it runs (before it can become ready).
    after_start: Callable[[Cluster], None] | None = None
    webhooks: str | None = None  # glob of its webhook manifests, registered once it is ready
    pod_label: str | None = None  # a label only its pods carry (selects its pod webhooks)
    webhook_config_name: str | None = None  # the one name its own code expects, if any
    webhook_failure_policy: str | None = None  # override, where the API server cannot verify it
    ready_url: str | None = None  # where it says it is ready, if not /readyz on its health port

    @property
    def binary_name(self) -> str:
        return f"{self.name}-operator"


def _config_file(
    api_version: str, cert_key: str = "internalCertManagement"
) -> Callable[[Path, RunDir], list[str]]:
    """JobSet, LWS and Trainer share kubebuilder's component-config shape: one --config file."""

    def argv(binary: Path, run: RunDir) -> list[str]:
        run.config.write_text(kubebuilder_config(api_version, run, cert_key=cert_key))
        return [str(binary), f"--config={run.config}", "--zap-devel=false"]

    return argv


def _kuberay(binary: Path, run: RunDir) -> list[str]:
    return [
        str(binary),
        "--enable-leader-election=false",
        "--metrics-addr=0",
        f"--health-probe-bind-address={HOST}:{run.health_port}",
        "--log-stdout-encoder=console",
    ]


_OWN_WEBHOOKS = (
    "; its own webhooks are served on 127.0.0.1 with a self-signed cert and registered with "
    "the API server by URL"
)

OPERATORS: dict[str, Operator] = {
    op.name: op
    for op in (
        Operator(
            name="jobset",
            module="sigs.k8s.io/jobset",
            version="v0.11.0",
            package="sigs.k8s.io/jobset",
            crds=("config/components/crd/bases/*.yaml",),
            argv=_config_file("config.jobset.x-k8s.io/v1alpha1"),
            webhooks="config/components/webhook/manifests.yaml",
            pod_label="jobset.sigs.k8s.io/jobset-name",
            notes="config file: leader election off, internalCertManagement off, metrics off; "
            "its controller needs its defaulting webhook (it panics on a JobSet the webhook "
            "has not defaulted)" + _OWN_WEBHOOKS + " (pod webhooks: only pods labelled "
            "jobset.sigs.k8s.io/jobset-name)",
        ),
        Operator(
            name="lws",
            module="sigs.k8s.io/lws",
            version="v0.7.0",
            package="sigs.k8s.io/lws/cmd",
            crds=("config/crd/bases/*.yaml",),
            argv=_config_file("config.lws.x-k8s.io/v1alpha1"),
            webhooks="config/webhook/manifests.yaml",
            pod_label="leaderworkerset.sigs.k8s.io/name",
            notes="as JobSet (the same kubebuilder config shape)" + _OWN_WEBHOOKS + " (pod "
            "webhooks: only pods labelled leaderworkerset.sigs.k8s.io/name)",
        ),
        Operator(
            name="ray",
            module="github.com/ray-project/kuberay/ray-operator",
            version="v1.5.0",
            package="github.com/ray-project/kuberay/ray-operator",
            crds=("config/crd/bases/*.yaml",),
            argv=_kuberay,
            notes="flags: leader election off, metrics off; webhooks are off unless "
            "ENABLE_WEBHOOKS=true, which is left unset",
        ),
        Operator(
            name="training-operator",
            module="github.com/kubeflow/training-operator",
            version="v1.8.1",
            package="github.com/kubeflow/training-operator/cmd/training-operator.v1",
            crds=tuple(
                f"manifests/base/crds/kubeflow.org_{scheme}s.yaml"
                for scheme in TRAINING_OPERATOR_SCHEMES
            ),
            argv=trainingoperator.argv,
            # Its rotator writes to the fixed /tmp path, where its webhook server must look too.
            env={
                "MY_POD_NAMESPACE": TRAINING_OPERATOR_NAMESPACE,
                "TMPDIR": "/tmp",
            },
            # Its rotator starts the controllers only after injecting its CA into this
            # configuration; its cert names training-operator.kubeflow.svc, not 127.0.0.1, so
            # the API server cannot verify it and the hooks must fail open (validation off).
            webhooks="manifests/base/webhook/manifests.yaml",
            webhook_config_name="validator.training-operator.kubeflow.org",
            webhook_failure_policy="Ignore",
            prepare=trainingoperator.create_secret,
            after_start=trainingoperator.mount_secret,
            notes="flags: leader election off, metrics off; its cert rotator cannot be turned "
            f"off, so namespace {TRAINING_OPERATOR_NAMESPACE} and an empty Secret "
            f"{TRAINING_OPERATOR_SECRET} are created for it to fill (it writes the serving cert to "
            "the fixed /tmp/k8s-webhook-server/serving-certs); its validating webhooks are "
            "registered by URL under the name its rotator patches (it waits for that before "
            "starting its controllers) with failurePolicy Ignore, as its cert names only "
            "training-operator.kubeflow.svc: validation is effectively off; the Secret's cert "
            "is written into that dir as a kubelet's volume mount would; its MPIJob (v1) "
            "scheme and CRD are left out (mpi-operator serves MPIJob)",
        ),
        Operator(
            name="mpi-operator",
            module="github.com/kubeflow/mpi-operator",
            version="v0.6.0",
            package="github.com/kubeflow/mpi-operator/cmd/mpi-operator",
            crds=("manifests/base/kubeflow.org_mpijobs.yaml",),
            argv=mpioperator.argv,
            ready_url=mpioperator.health_url(),
            notes="flags: metrics off, its leader-election Lease in kube-system (it cannot be "
            "switched off); health on the fixed port 8080 (no flag), so one cluster per "
            "machine runs it; no webhooks (see queuectl/testenv/mpioperator.py)",
        ),
        Operator(
            name="trainer",
            module="github.com/kubeflow/trainer/v2",
            version="v2.1.0",
            package="github.com/kubeflow/trainer/v2/cmd/trainer-controller-manager",
            crds=("manifests/base/crds/trainer.kubeflow.org_*.yaml",),
            argv=_config_file("config.trainer.kubeflow.org/v1alpha1", cert_key="certManagement"),
            needs_crds_of=("jobset",),
            webhooks="manifests/base/webhook/manifests.yaml",
            notes="config file: leader election off, certManagement off, metrics off; serves "
            "webhooks with a self-signed cert found through TMPDIR; needs JobSet's CRDs (a "
            "TrainJob becomes a JobSet)" + _OWN_WEBHOOKS + " (validating only)",
        ),
        Operator(
            name="karpenter",
            module="sigs.k8s.io/karpenter",
            version="v1.9.0",
            package="sigs.k8s.io/karpenter/kwok",
            crds=("kwok/charts/crds/karpenter.sh_*.yaml", "kwok/apis/crds/*.yaml"),
            argv=karpenter.argv,
            env={"SYSTEM_NAMESPACE": "kube-system"},
            prepare=karpenter.apply_node_class,
            go_directive="1.25.6",
            notes="its kwok cloud provider (creates Nodes that kwok runs): leader election "
            "off, webhooks off (v1 has none), metrics and health on free ports, instance types "
            "from a file queuectl writes (GPU shapes; see queuectl/testenv/karpenter.py)",
        ),
    )
}


def known() -> str:
    return ", ".join(OPERATORS)


def lookup(name: str) -> Operator:
    try:
        return OPERATORS[name]
    except KeyError:
        raise UnknownOperator(
            f"unknown operator {name!r}", f"choose from: {known()} (or `all`)"
        ) from None


def parse_names(text: str) -> list[str]:
    """`jobset,lws` or `all` -> operator names, each checked; order follows the table."""
    words = [w.strip() for w in text.split(",") if w.strip()]
    if words == ["all"]:
        return list(OPERATORS)
    for word in words:
        lookup(word)
    return [n for n in OPERATORS if n in words]
