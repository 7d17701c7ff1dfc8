"""One world of the bypass fuzzer: a namespace whose 8-GPU ClusterQueue one object of a kind
fills while a second waits, a plain user with edit-like rights in it, and the objects found
there (children and pods, by ownerReferences from the admitted object).

The pool (`Pool.setup`, once): H100 and A100 kwok nodes labelled and tainted for the fuzzer
alone, the H100 flavor over them, the RBAC every world's user is bound to, a priority class a
user might name and the TrainJob runtimes. A world is rebuilt in a fresh namespace whenever an
attempt changed it; the old one is deleted in the background.
"""

from __future__ import annotations

import contextlib
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

from bench.bypass.claims import ALIAS, PROBE_QUEUE
from bench.bypass.kinds import BIG_RUNTIME, RUNTIME, KindCase, runtime
from bench.chaos.world import Rest, wait_service_account
from queuectl.api import names
from queuectl.testenv.invariants import request_json
from queuectl.testenv.nodes import A100, H100
from queuectl.testenv.podgpus import active, holds_quota, is_true, pod_gpus

Obj = dict[str, Any]
OURS = f"/apis/{names.API_VERSION}"
POOL_LABEL = "bypass.queuectl.io/pool"
USER = "bypass-user"
ROLE = "queuectl-bypass-user"
TOP_CLASS = "bypass-top"
QUOTA_GPUS = 8
# Where children and pods are looked for: (collection under /namespaces/NS, kind).
CHILD_COLLECTIONS = (
    ("/apis/batch/v1/namespaces/{ns}/jobs", "Job"),
    ("/apis/apps/v1/namespaces/{ns}/statefulsets", "StatefulSet"),
    ("/apis/jobset.x-k8s.io/v1alpha2/namespaces/{ns}/jobsets", "JobSet"),
    ("/apis/ray.io/v1/namespaces/{ns}/rayclusters", "RayCluster"),
    ("/api/v1/namespaces/{ns}/pods", "Pod"),
)
USER_RESOURCES = {
    "": ["pods", "pods/resize", "services", "configmaps"],
    "batch": ["jobs"],
    "apps": ["statefulsets", "statefulsets/scale", "deployments", "replicasets"],
    "jobset.x-k8s.io": ["jobsets"],
    "ray.io": ["rayjobs", "rayclusters"],
    "kubeflow.org": ["pytorchjobs", "pytorchjobs/scale", "mpijobs", "mpijobs/scale"],
    "trainer.kubeflow.org": ["trainjobs"],
    "leaderworkerset.x-k8s.io": ["leaderworkersets", "leaderworkersets/scale"],
}
EDIT_VERBS = ["get", "list", "watch", "create", "update", "patch", "delete"]


class UserRest(Rest):
    """The same calls, impersonating a plain namespace user (not cluster-admin)."""

    HEADERS = {"Impersonate-User": USER, "Impersonate-Group": "system:authenticated"}

    def call(self, method: str, path: str, body: Any = None, patch: bool = False) -> Obj:
        ctype = "application/merge-patch+json" if patch else "application/json"
        return request_json(self.api, method, path, body, ctype, headers=self.HEADERS)

    def json_patch(self, path: str, ops: list[Obj]) -> Obj:
        return request_json(
            self.api, "PATCH", path, ops, "application/json-patch+json", headers=self.HEADERS
        )


def json_patch(rest: Rest, path: str, ops: list[Obj]) -> Obj:
    """An RFC 6902 patch as the admin (how the fuzzer puts things back)."""
    return request_json(rest.api, "PATCH", path, ops, "application/json-patch+json")


@dataclass
class Pool:
    """The fuzzer's nodes and cluster-wide objects; `flavor` admits onto its H100 nodes."""

    rest: Rest
    flavor: str = "bypass-h100"
    a100_nodes: list[str] = field(default_factory=list)

    def setup(self, add_nodes: Callable[..., list[Any]], h100_nodes: int = 6) -> Pool:
        taint = {"key": POOL_LABEL, "value": "yes", "effect": "NoSchedule"}
        labels = {POOL_LABEL: "yes"}
        h100 = add_nodes(h100_nodes, 8, H100, name_prefix="bypass-h", labels=labels, taints=[taint])
        for n in h100:  # the GPU alias a user may name (as an RDMA device would be offered)
            offer = {ALIAS: "8"}
            status = {"status": {"capacity": offer, "allocatable": offer}}
            self.rest.call("PATCH", f"/api/v1/nodes/{n.name}/status", status, patch=True)
        found = add_nodes(2, 8, A100, name_prefix="bypass-a", labels=labels, taints=[taint])
        self.a100_nodes = [n.name for n in found]
        tolerate = {**taint, "operator": "Equal"}
        rules = [
            {"apiGroups": [group], "resources": resources, "verbs": EDIT_VERBS}
            for group, resources in USER_RESOURCES.items()
        ]
        rules.append(
            {
                "apiGroups": [names.GROUP],
                "resources": ["workloads", "localqueues"],
                "verbs": ["get", "list", "watch"],
            }
        )
        self.rest.apply_all(
            (
                f"{OURS}/resourceflavors",
                {
                    "apiVersion": names.API_VERSION,
                    "kind": "ResourceFlavor",
                    "metadata": {"name": self.flavor},
                    "spec": {
                        "nodeLabels": {names.LABEL_GPU_PRODUCT: H100, POOL_LABEL: "yes"},
                        "tolerations": [tolerate],
                    },
                },
            ),
            (
                "/apis/rbac.authorization.k8s.io/v1/clusterroles",
                {"metadata": {"name": ROLE}, "rules": rules},
            ),
            (
                f"{OURS}/workloadpriorityclasses",
                {
                    "apiVersion": names.API_VERSION,
                    "kind": "WorkloadPriorityClass",
                    "metadata": {"name": TOP_CLASS},
                    "value": 1_000_000,
                },
            ),
        )
        return self

    def add_runtimes(self) -> None:
        path = "/apis/trainer.kubeflow.org/v1alpha1/clustertrainingruntimes"
        self.rest.apply_all((path, runtime(RUNTIME, 1)), (path, runtime(BIG_RUNTIME, 4)))


@dataclass
class World:
    """One namespace, its queues, `a` admitted and running, `b` waiting; what was found there."""

    case: KindCase
    namespace: str
    roles: dict[str, Obj] = field(default_factory=dict)  # role -> the object as last read
    paths: dict[str, str] = field(default_factory=dict)  # role -> its API path
    admitted_workload: Obj = field(default_factory=dict)
    queued_workload: Obj = field(default_factory=dict)
    baseline_gpus: int = 0

    @property
    def free_cq(self) -> str:
        return f"cq-free-{self.namespace}"


def _queues(pool: Pool, namespace: str) -> list[tuple[str, Obj]]:
    def cq(name: str, gpus: int) -> Obj:
        quota: list[Obj] = [
            {"name": names.GPU_RESOURCE, "nominalQuota": gpus},
            {"name": "cpu", "nominalQuota": 1000},
            {"name": "memory", "nominalQuota": "4Ti"},
        ]
        return {
            "apiVersion": names.API_VERSION,
            "kind": "ClusterQueue",
            "metadata": {"name": name},
            "spec": {
                "namespaceSelector": {"matchLabels": {names.LABEL_NAMESPACE_NAME: namespace}},
                "resourceGroups": [
                    {
                        "coveredResources": [q["name"] for q in quota],
                        "flavors": [{"name": pool.flavor, "resources": quota}],
                    }
                ],
            },
        }

    def lq(name: str, target: str) -> Obj:
        return {
            "apiVersion": names.API_VERSION,
            "kind": "LocalQueue",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"clusterQueue": target},
        }

    main, free, probe = (f"cq{x}-{namespace}" for x in ("", "-free", "-probe"))
    lqs = f"{OURS}/namespaces/{namespace}/localqueues"
    return [
        (f"{OURS}/clusterqueues", cq(main, QUOTA_GPUS)),
        (f"{OURS}/clusterqueues", cq(free, 0)),
        (f"{OURS}/clusterqueues", cq(probe, QUOTA_GPUS)),
        (lqs, lq("lq", main)),
        (lqs, lq("default", main)),
        (lqs, lq("lq-free", free)),
        (lqs, lq(PROBE_QUEUE, probe)),
    ]


def create_world(rest: Rest, pool: Pool, case: KindCase, timeout: float) -> World:
    """A fresh namespace with its queues and RBAC, `a` admitted and its GPU pods running, `b`
    waiting for quota; raises RuntimeError (naming what is missing) after `timeout`."""
    ns = f"bypass-{case.name.lower()}-{uuid.uuid4().hex[:5]}"
    rest.apply_all(("/api/v1/namespaces", {"metadata": {"name": ns}}))
    wait_service_account(rest, ns)
    rest.apply_all(
        *_queues(pool, ns),
        (
            f"/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/rolebindings",
            {
                "metadata": {"name": USER, "namespace": ns},
                "roleRef": {
                    "apiGroup": "rbac.authorization.k8s.io",
                    "kind": "ClusterRole",
                    "name": ROLE,
                },
                "subjects": [
                    {"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": USER}
                ],
            },
        ),
    )
    world = World(case, ns)
    path = case.path(ns)
    rest.apply_all(*((path, o) for o in case.make("a", ns, "lq", case.gpu_pods)))
    deadline = time.monotonic() + timeout
    _until(
        lambda: _filled(rest, world), deadline, f"{case.name} a admitted, 8 GPUs running in {ns}"
    )
    if case.after_admitted is not None:
        for obj in case.after_admitted("a", ns, "lq", case.gpu_pods):
            with contextlib.suppress(ApiException):  # refused: the world goes without it
                rest.create(path, obj)
    rest.apply_all(*((path, o) for o in case.make("b", ns, "lq", 1)))
    _until(lambda: _queued(rest, world), deadline, f"{case.name} b's Workload waiting in {ns}")
    discover(rest, world)
    return world


def _until(probe: Callable[[], bool], deadline: float, what: str) -> None:
    while not probe():
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out waiting for {what}")
        time.sleep(0.3)


def workloads(rest: Rest, ns: str) -> list[Obj]:
    found: list[Obj] = rest.call("GET", f"{OURS}/namespaces/{ns}/workloads")["items"]
    return found


def pods(rest: Rest, ns: str) -> list[Obj]:
    found: list[Obj] = rest.call("GET", f"/api/v1/namespaces/{ns}/pods")["items"]
    return found


def running_gpus(rest: Rest, ns: str) -> int:
    return sum(
        pod_gpus(p) for p in pods(rest, ns) if active(p) and p["status"].get("phase") == "Running"
    )


def _filled(rest: Rest, world: World) -> bool:
    held = [w for w in workloads(rest, world.namespace) if holds_quota(w)]
    if len(held) != 1 or running_gpus(rest, world.namespace) != QUOTA_GPUS:
        return False
    world.admitted_workload = held[0]
    world.baseline_gpus = QUOTA_GPUS
    return True


def _queued(rest: Rest, world: World) -> bool:
    uid = world.admitted_workload["metadata"]["uid"]
    rest_ = [w for w in workloads(rest, world.namespace) if w["metadata"]["uid"] != uid]
    if not rest_ or any(holds_quota(w) for w in rest_):
        return False
    world.queued_workload = rest_[0]
    return True


def _list(rest: Rest, path: str) -> list[Obj]:
    try:
        found: list[Obj] = rest.call("GET", path)["items"]
    except ApiException as err:
        if err.status == 404:
            return []  # that operator is not installed
        raise
    return found


def item_path(collection: str, obj: Obj) -> str:
    return f"{collection}/{obj['metadata']['name']}"


def discover(rest: Rest, world: World) -> None:
    """The roles of this world: `object` and `queued`, one child of each kind below `object`
    (by controller ownerReferences), one of its running pods and one gated pod."""
    ns = world.namespace
    found: list[tuple[str, str, Obj]] = []  # (kind, path, obj)
    collections = [*CHILD_COLLECTIONS, (world.case.collection, world.case.owner_kind or "Pod")]
    for collection, kind in dict.fromkeys(collections):
        c = collection.format(ns=ns)
        found += [(kind, item_path(c, o), o) for o in _list(rest, c)]
    by_uid = {o["metadata"]["uid"]: (k, p, o) for k, p, o in found}
    found = list(by_uid.values())
    case_path = world.case.path(ns)
    own = {
        p: o
        for k, p, o in found
        if p.startswith(case_path + "/") or (world.case.owner_kind and k == world.case.owner_kind)
    }
    if world.case.owner_kind is None:  # a pod group: the pods are the objects
        a = sorted((p for p, o in own.items() if o["metadata"]["name"].startswith("a-")), key=str)
        b = sorted((p for p, o in own.items() if o["metadata"]["name"].startswith("b-")), key=str)
        roots = {o["metadata"]["uid"] for p, o in own.items() if p in a}
        world.paths["object"], world.paths["queued"] = a[0], b[0]
    else:
        world.paths["object"] = f"{case_path}/a"
        world.paths["queued"] = f"{case_path}/b"
        roots = {o["metadata"]["uid"] for p, o in own.items() if p == world.paths["object"]}
    # everything below `object`, breadth first
    below: list[tuple[str, str, Obj]] = []
    frontier = set(roots)
    while frontier:
        nxt = set()
        for uid, (k, p, o) in by_uid.items():
            refs = o["metadata"].get("ownerReferences") or []
            if any(r.get("uid") in frontier for r in refs) and uid not in roots:
                below.append((k, p, o))
                nxt.add(uid)
        roots |= nxt
        frontier = nxt
    for k, p, o in sorted(below, key=lambda t: t[1]):
        role = "pod" if k == "Pod" else f"child:{k}"
        if k == "Pod" and (pod_gpus(o) == 0 or o["spec"].get("schedulingGates")):
            continue
        world.paths.setdefault(role, p)
    gated = sorted(p for k, p, o in found if k == "Pod" and o["spec"].get("schedulingGates"))
    if gated:
        world.paths["gated-pod"] = gated[0]
    if world.case.owner_kind is None:  # another of its running pods
        running = [p for p in a[1:] if not own[p]["spec"].get("schedulingGates")]
        world.paths["pod"] = running[0] if running else a[0]
    for role, p in world.paths.items():
        world.roles[role] = rest.call("GET", p)


def delete_world(rest: Rest, world: World) -> None:
    """Everything of the world goes, in the background (its pods end at once: grace 0)."""
    for path in (
        f"/api/v1/namespaces/{world.namespace}",
        f"{OURS}/clusterqueues/cq-{world.namespace}",
        f"{OURS}/clusterqueues/{world.free_cq}",
        f"{OURS}/clusterqueues/cq-probe-{world.namespace}",
    ):
        with contextlib.suppress(ApiException):  # already gone
            rest.call("DELETE", path, {"propagationPolicy": "Background"})


def evicted_since(wls: list[Obj], since_iso: str) -> list[str]:
    """Workloads evicted at or after `since_iso` (RFC 3339, second resolution): 'name: reason'."""
    out = []
    for wl in wls:
        for c in (wl.get("status") or {}).get("conditions") or []:
            if (
                c.get("type") == names.COND_EVICTED
                and c.get("status") == "True"
                and str(c.get("lastTransitionTime", "")) >= since_iso
            ):
                out.append(f"{wl['metadata']['name']}: {c.get('reason')}")
    return out


def still_admitted(wls: list[Obj], uid: str) -> bool:
    return any(
        w["metadata"]["uid"] == uid and holds_quota(w) and not is_true(w, names.COND_EVICTED)
        for w in wls
    )


def client_of(api: k8s.ApiClient) -> tuple[Rest, UserRest]:
    return Rest(api), UserRest(api)
