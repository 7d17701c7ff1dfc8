"""`queuectl controller`: the controller, its webhooks, health and metrics in one process.

This module is the only place that joins `queuectl.controller` and `queuectl.webhooks` (the two
are sibling layers that may not import each other): the webhooks ask their questions of the
controller's cache, which implements their `QueueLookup` Protocol.

In-cluster (no --kubeconfig) the webhook configurations are the static ones the kustomize base
ships; the CertManager injects the CA. Out-of-cluster (--kubeconfig, and `queuectl dev up`)
`--register-webhooks` (the default then) also writes the configurations pointing at
https://127.0.0.1:PORT, so a local cluster gets the whole system from one command.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import signal
import sys
import tempfile
from dataclasses import dataclass, field
from typing import Any

from kubernetes_asyncio import client as k8s_client

from queuectl import metrics
from queuectl.api import names
from queuectl.api.resource import Resource
from queuectl.api.views import ObjectView
from queuectl.cli import dev, visibility_server
from queuectl.cli.controller_flags import add_arguments
from queuectl.cli.main import Subparsers
from queuectl.controller.health import health_app, metrics_app, port_of, serve
from queuectl.controller.leader import LeaderElector
from queuectl.controller.manager import Controller, Options
from queuectl.controller.nodes.drain import DrainOptions
from queuectl.controller.watch import kube as k
from queuectl.controller.watch.kube import Kube, KubeError
from queuectl.controller.workloads.pods_ready import PodsReadyOptions
from queuectl.jobs.registry import KINDS, Registry, load_kind
from queuectl.webhooks.certmanager import CertManager
from queuectl.webhooks.configs import UrlClient, controller_username, render_webhook_configurations
from queuectl.webhooks.server import bound_port, start_webhook_server

log = logging.getLogger("queuectl.controller")


@dataclass
class Config:
    kubeconfig: str | None = None
    webhook_host: str = "127.0.0.1"
    webhook_port: int = names.WEBHOOK_PORT
    health_port: int = 8081
    metrics_port: int = 8080
    health_host: str = "127.0.0.1"
    metrics_host: str = "127.0.0.1"
    leader_elect: bool = False
    register_webhooks: bool = False
    cert_mode: str = "self"
    """self: keep a CA and serving certificate in a Secret and inject the CA bundle;
    external: serve tls.crt/tls.key that someone else (cert-manager) puts in cert_dir."""
    install_crds: bool = False
    impersonate: bool = False
    cert_dir: str | None = None
    namespace: str = names.SYSTEM_NAMESPACE
    """Where queuectl is installed: its Lease, certificate Secret and ServiceAccount."""
    controller_user: str | None = None
    """The controller's username as the API server sees it; None: its ServiceAccount in
    `namespace`. The webhooks trust this user's writes to Jobs and Workloads."""
    options: Options = field(default_factory=Options)
    job_kinds: tuple[str, ...] = ()
    """Job kinds from outside the tree, as MODULE:ATTRIBUTE, added to the registered ones."""
    kueue_queue_label: bool = False
    """Queue new jobs that carry Kueue's queue label (webhooks/kueue_label.py)."""
    visibility_port: int = names.VISIBILITY_PORT
    register_visibility: bool = False
    """Out of cluster: register the visibility APIService pointing at this process."""

    def kinds(self) -> Registry:
        return KINDS.with_kinds(*(load_kind(spec) for spec in self.job_kinds))

    def identity(self) -> str:
        return self.controller_user or controller_username(self.namespace)


@dataclass
class Running:
    """A started controller process (or in-process task, for tests)."""

    controller: Controller
    webhook_port: int
    health_port: int
    metrics_port: int
    tasks: list[asyncio.Task[Any]]
    runners: list[Any]
    kube: Kube
    api: k8s_client.ApiClient
    namespace: str = names.SYSTEM_NAMESPACE
    visibility_port: int | None = None
    """None: the API server publishes no front-proxy CA, so the visibility API is not served."""
    registered_visibility: bool = False

    async def stop(self) -> None:
        for t in self.tasks:
            t.cancel()
        for t in self.tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await t
        for r in self.runners:
            await r.cleanup()
        await self.controller.events.drain(0.5)
        if self.registered_visibility:
            await visibility_server.unregister(self.kube, self.namespace)
        await self.kube.close()
        await self.api.close()


async def _whoami(kube: Kube) -> str | None:
    try:
        review = await kube.request(
            "POST",
            "/apis/authentication.k8s.io/v1/selfsubjectreviews",
            body={"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"},
        )
    except KubeError:
        return None
    user = (ObjectView(review).status.get("userInfo") or {}).get("username")
    return str(user) if user else None


async def _ensure_namespace(kube: Kube, name: str) -> None:
    try:
        await kube.create(
            k.NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
        )
    except KubeError as err:
        if not err.conflict:
            raise


async def _apply(kube: Kube, obj: dict[str, Any], plural: str) -> None:
    res = Resource("admissionregistration.k8s.io", "v1", plural, False, obj["kind"])
    name = obj["metadata"]["name"]
    try:
        current = await kube.get(res, name)
    except KubeError as err:
        if not err.not_found:
            raise
        await kube.create(res, obj)
        return
    obj["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
    await kube.request("PUT", res.path(None, name), body=obj)


CRDS = Resource(
    "apiextensions.k8s.io", "v1", "customresourcedefinitions", False, "CustomResourceDefinition"
)


async def install_crds(kube: Kube, timeout: float = 60.0) -> None:
    """Server-side apply our CRDs and wait until each is Established (out-of-cluster only:
    in-cluster they come with the kustomize base)."""
    from queuectl.crds.render import load

    for crd in load():
        await kube.patch(CRDS, crd["metadata"]["name"], crd, content_type=k.APPLY_PATCH, force=True)
    deadline = asyncio.get_running_loop().time() + timeout
    for crd in load():
        while True:
            got = await kube.get(CRDS, crd["metadata"]["name"])
            conds = ObjectView(got).status.get("conditions") or ()
            if any(c.get("type") == "Established" and c.get("status") == "True" for c in conds):
                break
            if asyncio.get_running_loop().time() > deadline:
                raise TimeoutError(f"CRD {crd['metadata']['name']} not established")
            await asyncio.sleep(0.2)


async def start(config: Config) -> Running:
    """Start everything and return once the webhooks listen and the caches are synced."""
    kinds = config.kinds()  # a bad --job-kind fails before anything starts
    kube = await Kube.connect(config.kubeconfig)
    api = kube.api_client  # the CertManager speaks the generated client over the same pool
    if config.kubeconfig:
        await _ensure_namespace(kube, config.namespace)
    if config.install_crds:
        await install_crds(kube)
    cert_dir = config.cert_dir or tempfile.mkdtemp(prefix="queuectl-webhook-certs-")
    certs: CertManager | None = None
    ca_bundle: bytes | None = None
    if config.cert_mode == "self":
        certs = CertManager(api, cert_dir, namespace=config.namespace)
        ca_bundle = (await certs.ensure()).ca_bundle()
    leader = (
        LeaderElector(kube, namespace=config.namespace, identity=os.environ.get("POD_NAME"))
        if config.leader_elect
        else None
    )
    controller = Controller(kube, options=config.options, leader=leader, kinds=kinds)
    users = {config.identity()}
    if config.impersonate:
        # Out-of-cluster the kubeconfig is usually an admin's; acting as the controller's
        # service account (with the admin's groups) lets the Job webhook tell the controller's
        # writes from a person's, so bypass attempts are refused here as they are in-cluster.
        kube.api_client.set_default_header("Impersonate-User", config.identity())
        kube.api_client.set_default_header("Impersonate-Group", "system:masters")
        if not await _whoami(kube):
            raise RuntimeError(
                "impersonating the controller's service account was refused; "
                "run with --no-impersonate or an admin kubeconfig"
            )
    tasks = [asyncio.create_task(controller.run(), name="controller")]
    runners = []
    webhook = await start_webhook_server(
        config.webhook_host,
        config.webhook_port,
        cert_dir,
        controller.cache,
        users,
        kinds=kinds,
        kueue_queue_label=config.kueue_queue_label,
    )
    runners.append(webhook)
    webhook_port = bound_port(webhook)
    visibility_port = None
    proxy = await visibility_server.read_front_proxy(kube)
    if proxy is not None:
        vis = await visibility_server.start_visibility_server(
            config.webhook_host, config.visibility_port, cert_dir, controller, proxy
        )
        runners.append(vis)
        visibility_port = visibility_server.bound_port(vis)

    def ready() -> tuple[bool, str]:
        if not webhook.addresses:
            return False, "webhook listener is not up"
        if not controller.synced():
            return False, "caches not synced"
        return True, ""

    health = await serve(health_app(ready), config.health_host, config.health_port)
    mets = await serve(
        metrics_app(metrics.CONTROLLER_REGISTRY), config.metrics_host, config.metrics_port
    )
    runners += [health, mets]
    if config.register_webhooks:
        mutating, validating = render_webhook_configurations(
            UrlClient(f"https://127.0.0.1:{webhook_port}"),
            ca_bundle,
            namespace=config.namespace,
            controller_user=config.identity(),
            kinds=kinds,
            kueue_queue_label=config.kueue_queue_label,
        )
        await _apply(kube, mutating, "mutatingwebhookconfigurations")
        await _apply(kube, validating, "validatingwebhookconfigurations")
    registered = config.register_visibility and visibility_port is not None
    if registered:
        assert visibility_port is not None
        await visibility_server.register(kube, config.namespace, visibility_port, ca_bundle)
    if certs is not None:
        tasks.append(asyncio.create_task(certs.run(), name="certs"))
    running = Running(
        controller,
        webhook_port,
        port_of(health),
        port_of(mets),
        tasks,
        runners,
        kube,
        api,
        config.namespace,
        visibility_port,
        registered,
    )
    try:
        while not controller.started.is_set():
            if tasks[0].done():
                tasks[0].result()
            await asyncio.sleep(0.05)
    except BaseException:
        await running.stop()
        raise
    return running


async def _main(config: Config) -> int:
    running = await start(config)
    log.info(
        "controller up: webhooks https://%s:%d, health :%d, metrics :%d",
        config.webhook_host,
        running.webhook_port,
        running.health_port,
        running.metrics_port,
    )
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    waiter = asyncio.create_task(stop.wait())
    done, _ = await asyncio.wait([waiter, running.tasks[0]], return_when=asyncio.FIRST_COMPLETED)
    code = 0
    if running.tasks[0] in done and not running.tasks[0].cancelled():
        exc = running.tasks[0].exception()
        if exc is not None:
            log.error("controller stopped: %s", exc)
            code = 1
    waiter.cancel()
    await running.stop()
    return code


def run(args: argparse.Namespace) -> int:
    logging.basicConfig(
        level=getattr(logging, args.log_level.upper()),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    return asyncio.run(_main(config_from_args(args)))


def config_from_args(args: argparse.Namespace) -> Config:
    """The parsed flags as a Config (defaults that depend on other flags resolved here)."""
    register = args.register_webhooks
    if register is None:
        register = bool(args.kubeconfig)
    return Config(
        kubeconfig=args.kubeconfig,
        webhook_host=args.webhook_host,
        webhook_port=args.webhook_port,
        health_port=args.health_port,
        metrics_port=args.metrics_port,
        health_host=args.health_host or args.bind_host,
        metrics_host=args.metrics_host or args.bind_host,
        leader_elect=args.leader_elect,
        register_webhooks=register,
        install_crds=register if args.install_crds is None else args.install_crds,
        impersonate=register if args.impersonate is None else args.impersonate,
        cert_dir=args.cert_dir,
        cert_mode=args.cert_mode,
        namespace=args.namespace or _pod_namespace(args.kubeconfig) or names.SYSTEM_NAMESPACE,
        controller_user=args.controller_user,
        options=Options(
            drain=DrainOptions(
                enabled=args.auto_drain,
                max_share=args.drain_max_share,
                node_failure_s=args.node_failure_seconds,
                agent_silence_s=args.agent_silence_seconds,
            ),
            preemption_patience_s=args.preemption_patience_seconds,
            fair_preemption=args.fair_sharing_preemption,
            kind_recheck_s=args.job_kind_recheck_seconds,
            pods_ready=PodsReadyOptions(
                timeout_s=args.pods_ready_timeout_seconds,
                recovery_s=args.pods_ready_recovery_seconds,
                requeue_limit=args.pods_ready_requeue_limit,
                backoff_base_s=args.pods_ready_backoff_base_seconds,
                backoff_max_s=args.pods_ready_backoff_max_seconds,
                block_admission=args.pods_ready_block_admission,
            ),
        ),
        job_kinds=tuple(args.job_kind or ()),
        kueue_queue_label=args.kueue_queue_label,
        visibility_port=args.visibility_port,
        register_visibility=args.register_visibility,
    )


def _pod_namespace(kubeconfig: str | None) -> str | None:
    """In-cluster, the pod's namespace (downward API). Out of cluster the shell's environment
    says nothing about the target cluster, so it is ignored."""
    return None if kubeconfig else os.environ.get("POD_NAMESPACE") or None


def add_parser(subparsers: Subparsers) -> None:
    p = subparsers.add_parser("controller", help="run the queuectl controller and its webhooks")
    add_arguments(p)
    p.set_defaults(func=run)


def _start_in_dev(plane: Any) -> object:
    """`queuectl dev up`: one more supervised process, ready when /readyz answers."""
    from queuectl.testenv.controllerargs import controller_args
    from queuectl.testenv.ports import free_ports
    from queuectl.testenv.readiness import http_probe

    health, mets, hook = free_ports(3)
    return plane.start_process(
        "queuectl-controller",
        [
            sys.executable,
            *controller_args(
                plane.kubeconfig,
                webhook_port=hook,
                health_port=health,
                metrics_port=mets,
                extra=["--leader-elect", "--register-visibility"],
            ),
        ],
        ready=http_probe(f"http://127.0.0.1:{health}/readyz"),
    )


dev.EXTRA_PROCESSES.append(_start_in_dev)
