"""The workload operators queuectl queues (JobSet, LWS, KubeRay, Kubeflow), as real processes.

Each is built from its own Go module at a pinned release, once, into the testenv cache (keyed
by module, version and build flags), its CRDs are applied from that module's own manifests, and
it runs against the local control plane like kube-controller-manager: a supervised process with
its log in `logs/operator-<name>.log`, stopped by `ControlPlane.stop()` and `queuectl dev down`.

How each is run (flags, what is switched off and why) is in OPERATORS below and in
docs/design/testenv.md.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import subprocess
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client as k8s

from queuectl.testenv import karpenter, mpioperator
from queuectl.testenv.build import Progress, _run_streaming, build_once, check_go, find_go
from queuectl.testenv.cluster import Cluster
from queuectl.testenv.controlplane import ControlPlane
from queuectl.testenv.errors import BuildFailed, ComponentFailed, TestEnvError
from queuectl.testenv.operatorargs import HOST, RunDir, kubebuilder_config
from queuectl.testenv.operatorhooks import rewrite
from queuectl.testenv.ports import free_ports
from queuectl.testenv.readiness import Probe, http_probe, insecure_tls, wait_ready
from queuectl.testenv.versions import pinned
from queuectl.testenv.waiting import WaitTimeout, eventually

_LDFLAGS = "-s -w"


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


TRAINING_OPERATOR_NAMESPACE = "kubeflow"
TRAINING_OPERATOR_SCHEMES = ("tfjob", "pytorchjob", "mxjob", "xgboostjob", "paddlejob")
"""Every kind it serves but MPIJob: mpi-operator serves that (v2beta1) under the same CRD name."""
TRAINING_OPERATOR_SECRET = "training-operator-webhook-cert"


def _training_operator(binary: Path, run: RunDir) -> list[str]:
    return [
        str(binary),
        "--leader-elect=false",
        "--metrics-bind-address=0",
        f"--health-probe-bind-address={HOST}:{run.health_port}",
        f"--webhook-server-port={run.webhook_port}",
        "--zap-devel=false",
        *(f"--enable-scheme={scheme}" for scheme in TRAINING_OPERATOR_SCHEMES),
    ]


TRAINING_OPERATOR_CERT_DIR = Path("/tmp/k8s-webhook-server/serving-certs")  # fixed in its code


def _mount_training_operator_secret(cluster: Cluster, timeout: float = 60) -> None:
    """Its rotator fills the Secret and then waits for the files a kubelet would mount from
    it into its cert dir; write them there, as that mount would."""
    with cluster.api_client() as api:
        core = k8s.CoreV1Api(api)

        def data() -> dict[str, str]:
            secret = core.read_namespaced_secret(
                TRAINING_OPERATOR_SECRET, TRAINING_OPERATOR_NAMESPACE
            )
            return {k: str(v) for k, v in (secret.data or {}).items()}

        found = eventually(
            data, lambda d: "tls.crt" in d and "tls.key" in d, timeout=timeout, what="its cert"
        )
    TRAINING_OPERATOR_CERT_DIR.mkdir(parents=True, exist_ok=True)
    for key, value in found.items():
        target = TRAINING_OPERATOR_CERT_DIR / key
        target.touch(mode=0o600)
        target.write_bytes(base64.b64decode(value))


def _training_operator_secret(cluster: Cluster) -> None:
    """Its cert rotator cannot be switched off and only fills an existing Secret."""
    manifest = {
        "apiVersion": "v1",
        "kind": "List",
        "items": [
            {
                "apiVersion": "v1",
                "kind": "Namespace",
                "metadata": {"name": TRAINING_OPERATOR_NAMESPACE},
            },
            {
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": {
                    "name": TRAINING_OPERATOR_SECRET,
                    "namespace": TRAINING_OPERATOR_NAMESPACE,
                },
            },
        ],
    }
    cluster.kubectl(
        "apply",
        "--server-side",
        "--field-manager=queuectl-testenv",
        "-f",
        "-",
        input=yaml.safe_dump(manifest),
    )


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
            argv=_training_operator,
            # Its rotator writes to the fixed /tmp path, where its webhook server must look too.
            env={"MY_POD_NAMESPACE": TRAINING_OPERATOR_NAMESPACE, "TMPDIR": "/tmp"},
            # Its rotator starts the controllers only after injecting its CA into this
            # configuration; its cert names training-operator.kubeflow.svc, not 127.0.0.1, so
            # the API server cannot verify it and the hooks must fail open (validation off).
            webhooks="manifests/base/webhook/manifests.yaml",
            webhook_config_name="validator.training-operator.kubeflow.org",
            webhook_failure_policy="Ignore",
            prepare=_training_operator_secret,
            after_start=_mount_training_operator_secret,
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


# ---- build -------------------------------------------------------------------------------
def cache_key(op: Operator) -> str:
    digest = hashlib.sha256(
        f"{op.module}@{op.version};{op.package};{_LDFLAGS};cgo=0".encode()
    ).hexdigest()
    return f"operator-{op.name}-{op.version}-{digest[:12]}"


def _build_module(op: Operator, directory: Path) -> None:
    """A throwaway module that requires only the operator, seeded with the operator's go.sum,
    so `go build -mod=mod` resolves exactly the operator's own dependency versions. Needed
    because `go install module@version` asks the proxy for the module's version list (for
    deprecation notices), which the proxy here refuses for some of these modules."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "go.mod").write_text(
        f"module queuectl.io/testenv/operator/{op.name}\n\ngo {op.go_directive}\n\n"
        f"require {op.module} {op.version}\n"
    )
    (directory / "go.sum").write_text((module_dir(op) / "go.sum").read_text())


def module_dir(op: Operator) -> Path:
    """The operator's source in the Go module cache (downloaded on first use)."""
    go = check_go(find_go(), pinned().go)
    done = subprocess.run(
        [str(go), "mod", "download", "-json", f"{op.module}@{op.version}"],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    if done.returncode != 0:
        raise BuildFailed(
            f"cannot download {op.module}@{op.version}",
            "check access to the Go module proxy (GOPROXY) and that it serves this version",
            (done.stdout + done.stderr).strip()[-2000:],
        )
    info = json.loads(done.stdout)
    return Path(str(info["Dir"]))


def build(name: str, progress: Progress = print, *, root: Path | None = None) -> Path:
    """The operator's binary for its pinned version, built the first time only."""
    op = lookup(name)

    def make(staging: Path, log: Path) -> dict[str, object]:
        go = check_go(find_go(), pinned().go)
        _build_module(op, staging / "module")
        _run_streaming(
            [
                str(go),
                "build",
                "-mod=mod",
                "-v",
                "-trimpath",
                "-ldflags",
                _LDFLAGS,
                "-o",
                str(staging / op.binary_name),
                op.package,
            ],
            cwd=staging / "module",
            env=dict(os.environ, CGO_ENABLED="0"),
            log=log,
            what=f"go build {op.module} {op.version}",
            progress=progress,
        )
        return {"module": op.module, "version": op.version, "package": op.package}

    final = build_once(
        cache_key(op),
        make,
        announce=f"Building the {op.name} operator ({op.module} {op.version}), first time "
        "only: a few minutes on 2 cores; later runs reuse the cache.",
        what=f"the {op.name} operator",
        progress=progress,
        root=root,
        complete=lambda d: os.access(d / op.binary_name, os.X_OK),
    )
    return final / op.binary_name


# ---- CRDs and process --------------------------------------------------------------------
def _holds_crd(path: Path) -> bool:
    """Whether a manifest holds a CRD (a glob also matches a kustomization.yaml beside them,
    as Trainer's manifests/base/crds/ has, which kubectl cannot apply)."""
    docs = yaml.safe_load_all(path.read_text())
    return any(isinstance(d, dict) and d.get("kind") == "CustomResourceDefinition" for d in docs)


def crd_files(name: str) -> list[Path]:
    op = lookup(name)
    base = module_dir(op)
    found = sorted({p for pattern in op.crds for p in base.glob(pattern) if _holds_crd(p)})
    if not found:
        raise BuildFailed(
            f"no CRD manifests under {base} for {', '.join(op.crds)}",
            "the operator's module layout changed: update its `crds` in OPERATORS",
        )
    return found


def install_crds(cluster: Cluster, name: str, *, timeout: float = 60) -> list[str]:
    """Server-side apply the operator's own CRDs and wait until they are Established."""
    names: list[str] = []
    for path in crd_files(name):
        for doc in yaml.safe_load_all(path.read_text()):
            if isinstance(doc, dict) and doc.get("kind") == "CustomResourceDefinition":
                names.append(str(doc["metadata"]["name"]))
        cluster.kubectl(
            "apply",
            "--server-side",
            "--force-conflicts",
            "--field-manager=queuectl-testenv",
            "-f",
            str(path),
        )
    with cluster.api_client() as api:
        ext = k8s.ApiextensionsV1Api(api)

        def established() -> list[str]:
            waiting = []
            for crd_name in names:
                status = ext.read_custom_resource_definition(crd_name).status
                conditions = status.conditions if status is not None else None
                if not any(
                    c.type == "Established" and c.status == "True" for c in conditions or []
                ):
                    waiting.append(crd_name)
            return waiting

        try:
            eventually(established, lambda left: not left, timeout=timeout, what="CRDs Established")
        except WaitTimeout as exc:
            raise ComponentFailed(
                f"the {name} CRDs were not Established in {timeout:.0f}s",
                "read the API server log",
                str(exc),
            ) from exc
    return names


def crds_installed(cluster: Cluster, name: str) -> bool:
    """Whether every CRD the operator owns is served (its manifests name them)."""
    wanted = {
        str(doc["metadata"]["name"])
        for path in crd_files(name)
        for doc in yaml.safe_load_all(path.read_text())
        if isinstance(doc, dict) and doc.get("kind") == "CustomResourceDefinition"
    }
    with cluster.api_client() as api:
        items = k8s.ApiextensionsV1Api(api).list_custom_resource_definition().items
        have = {c.metadata.name for c in items if c.metadata is not None}
    return wanted <= have


def process_name(name: str) -> str:
    return f"operator-{name}"


def ensure_running(plane: ControlPlane, name: str, progress: Progress | None = None) -> None:
    """Start the operator, or start it again when its process has died: mpi-operator exits
    when it cannot renew its leader Lease for a few seconds, as across a restart of the API
    server (the fault tests), and the tests after such a restart would meet it dead."""
    record = plane.supervisor.get(process_name(name))
    if record is not None and record.alive():
        return
    if record is not None:
        (progress or plane.progress)(f"  {process_name(name)} exited; starting it again")
        plane.supervisor.forget(process_name(name))
    start(plane, name, progress)


def start(plane: ControlPlane, name: str, progress: Progress | None = None) -> Path:
    """Build (once), install the CRDs and run the operator; returns its binary."""
    op = lookup(name)
    say = progress or plane.progress
    binary = build(name, say)
    for other in (*op.needs_crds_of, name):
        install_crds(plane, other)
    if op.prepare is not None:
        op.prepare(plane)
    run = RunDir.create(plane.work_dir / "operators" / name, *free_ports(2))
    hooks: list[str] = []
    if op.webhooks is not None:
        # Before the start: training-operator's rotator waits for its configuration to exist
        # before it reports ready; the others' hooks only see their own kinds and pods, which
        # nobody creates before start() returns.
        register_webhooks(plane, name, run)
        hooks = webhook_urls(name, run)
    env = {**os.environ, "KUBECONFIG": plane.kubeconfig, "TMPDIR": str(run.tmp), **op.env}
    url = op.ready_url or f"http://{HOST}:{run.health_port}/readyz"
    ready = _serving(http_probe(url), hooks)
    if op.after_start is None:
        plane.start_process(process_name(name), op.argv(binary, run), ready=ready, env=env)
        return binary
    record = plane.start_process(process_name(name), op.argv(binary, run), env=env)
    op.after_start(plane)
    wait_ready(record, ready, timeout=plane.timeout, what=process_name(name))
    return binary


def _serving(ready: Probe, hooks: Sequence[str]) -> Probe:
    """Ready once /readyz answers and every webhook path is served: a controller-runtime
    operator (JobSet) reports ready before it registers its webhook handlers (after its certs
    rotate in), and a create in that gap fails with "could not find the requested resource"."""
    context = insecure_tls()

    def served(url: str) -> bool:
        request = urllib.request.Request(url, data=b"{}", method="POST")
        request.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(request, timeout=2, context=context):
                return True
        except urllib.error.HTTPError as err:
            return err.code != 404  # a bad review is answered: the handler is there
        except (urllib.error.URLError, OSError, ValueError):
            return False

    return lambda: ready() and all(served(url) for url in hooks)


def _configs(name: str, run: RunDir) -> list[dict[str, Any]]:
    """The operator's own webhook configurations, pointed at its port (operatorhooks)."""
    op = lookup(name)
    assert op.webhooks is not None
    docs = [
        doc
        for path in sorted(module_dir(op).glob(op.webhooks))
        for doc in yaml.safe_load_all(path.read_text())
    ]
    return rewrite(
        docs,
        operator=name,
        port=run.webhook_port,
        ca_pem=(run.cert_dir / "ca.crt").read_bytes(),
        pod_label=op.pod_label,
        name=op.webhook_config_name,
        failure_policy=op.webhook_failure_policy,
    )


def webhook_urls(name: str, run: RunDir) -> list[str]:
    """Every URL the API server calls for the operator's webhooks."""
    return sorted(
        {str(hook["clientConfig"]["url"]) for c in _configs(name, run) for hook in c["webhooks"]}
    )


def register_webhooks(cluster: Cluster, name: str, run: RunDir) -> list[str]:
    """Point the API server at the running operator's own webhooks (see operatorhooks)."""
    configs = _configs(name, run)
    manifest = {"apiVersion": "v1", "kind": "List", "items": configs}
    cluster.kubectl(
        "apply",
        "--server-side",
        "--force-conflicts",
        "--field-manager=queuectl-testenv",
        "-f",
        "-",
        input=yaml.safe_dump(manifest),
    )
    return [str(c["metadata"]["name"]) for c in configs]


def start_all(plane: ControlPlane, names: Sequence[str], progress: Progress | None = None) -> None:
    for name in names:
        start(plane, name, progress)
