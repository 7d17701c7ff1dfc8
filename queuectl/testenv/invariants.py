"""The invariants a fault must never break, checked from what the API server holds.

`check(snapshot)` is pure: given ClusterQueues, LocalQueues, Workloads, Jobs and Pods as the API
returns them, it names every broken invariant:

- `quota`: a ClusterQueue's admitted usage (Workloads with QuotaReserved, not Finished) exceeds
  nominal + what it may borrow, per flavor and resource;
- `pods-over-quota`: the GPUs that a ClusterQueue's active pods request exceed the same bound
  summed over its flavors (what actually runs, whatever the Workloads say);
- `pods-over-admission`: a Job runs more pods than its Workload admitted (none when not admitted);
- `two-admitted-workloads`: one Job owns two admitted Workloads;
- per namespace named in `Snapshot.gpu_namespaces`, whatever kind made the pods (a JobSet's
  child Jobs, a RayCluster, bare pods, a pod nobody queued): `gpus-over-admission`, the GPUs its
  active pods hold on a flavor's nodes exceed what its Workloads were admitted on that flavor;
  `gpu-pods-over-admission`, more GPU pods run than its Workloads admitted; `gpus-off-flavor`, a
  GPU pod runs on a node that no flavor admitted in the namespace matches.

`History` follows the Workloads across snapshots: a Workload admitted again without an eviction
in between is a double admission, and it records when each Workload was first seen admitted (so
a test can say when admissions resumed). `Sampler` takes a snapshot every 200 ms in a thread.

Pods are listed before Workloads: a pod seen running was admitted when listed, so a Workload
listed later still carries its admission (or Finished), and a fresh admission never looks like
a pod without one.
"""

from __future__ import annotations

import json
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

from queuectl.api import names
from queuectl.api.quantity import canonical
from queuectl.testenv.podgpus import (
    Violation,
    active,
    admission_usage,
    admitted_pods_of,
    holds_quota,
    key_of,
    namespace_gpus,
    pod_gpus,
    spec_of,
    status_of,
)

Obj = dict[str, Any]
UNLIMITED = 10**18
GROUP, VERSION = names.GROUP, names.VERSION


@dataclass(frozen=True)
class Snapshot:
    cluster_queues: Sequence[Obj]
    local_queues: Sequence[Obj]
    workloads: Sequence[Obj]
    jobs: Sequence[Obj]
    pods: Sequence[Obj]
    nodes: Sequence[Obj] = ()
    flavors: Sequence[Obj] = ()  # ResourceFlavors: a node's flavor is the one its labels match
    gpu_namespaces: Sequence[str] = ()
    """Namespaces whose every GPU pod must be covered by an admission there (`namespace_gpus`)."""


def quota_limits(cluster_queues: Sequence[Obj]) -> dict[str, dict[tuple[str, str], int]]:
    """(flavor, resource) -> nominal + borrowable, per ClusterQueue.

    Borrowable is bounded by `borrowingLimit` and by what the other ClusterQueues of the same
    cohort lend (`lendingLimit`, else their nominal quota). Cohorts' own quota is not counted,
    so with cohort quota this bound is too low, never too high: the suites use none.
    """
    nominal: dict[str, dict[tuple[str, str], tuple[int, int, int]]] = {}
    for cq in cluster_queues:
        own: dict[tuple[str, str], tuple[int, int, int]] = {}
        for group in spec_of(cq).get("resourceGroups") or []:
            for fl in group.get("flavors") or []:
                for res in fl.get("resources") or []:
                    name = res["name"]
                    nom = canonical(name, res.get("nominalQuota", 0))
                    borrow = res.get("borrowingLimit")
                    lend = res.get("lendingLimit")
                    own[(fl["name"], name)] = (
                        nom,
                        UNLIMITED if borrow is None else canonical(name, borrow),
                        nom if lend is None else canonical(name, lend),
                    )
        nominal[cq["metadata"]["name"]] = own
    cohort_of = {cq["metadata"]["name"]: spec_of(cq).get("cohortName") for cq in cluster_queues}
    limits: dict[str, dict[tuple[str, str], int]] = {}
    for name, own in nominal.items():
        limits[name] = {}
        for fr, (nom, borrow_limit, _) in own.items():
            lent = sum(
                other[fr][2]
                for other_name, other in nominal.items()
                if other_name != name
                and cohort_of[name]
                and cohort_of[other_name] == cohort_of[name]
                and fr in other
            )
            limits[name][fr] = nom + min(borrow_limit, lent)
    return limits


def _owner_job(obj: Obj) -> str | None:
    for ref in obj["metadata"].get("ownerReferences") or []:
        if ref.get("kind") == "Job":
            return f"{obj['metadata'].get('namespace', '')}/{ref['name']}"
    return None


def check(snap: Snapshot) -> list[Violation]:
    """Every invariant the snapshot breaks."""
    found: list[Violation] = []
    limits = quota_limits(snap.cluster_queues)

    usage: dict[str, Counter[tuple[str, str]]] = defaultdict(Counter)
    admitted_by_job: dict[str, list[Obj]] = defaultdict(list)
    for wl in snap.workloads:
        if holds_quota(wl):
            usage[str(status_of(wl)["admission"].get("clusterQueue", ""))] += admission_usage(wl)
            job = _owner_job(wl)
            if job:
                admitted_by_job[job].append(wl)
    for cq, used in sorted(usage.items()):
        for fr, amount in sorted(used.items()):
            bound = limits.get(cq, {}).get(fr, 0)
            if amount > bound:
                found.append(
                    Violation("quota", cq, f"{fr[0]}/{fr[1]}: {amount} admitted > {bound} allowed")
                )
    for job, wls in sorted(admitted_by_job.items()):
        if len(wls) > 1:
            wl_names = ", ".join(sorted(w["metadata"]["name"] for w in wls))
            found.append(Violation("two-admitted-workloads", job, wl_names))

    cq_of_lq = {key_of(lq): str(spec_of(lq).get("clusterQueue", "")) for lq in snap.local_queues}
    queue_of_job = {
        key_of(j): (j["metadata"].get("labels") or {}).get(names.LABEL_QUEUE_NAME)
        for j in snap.jobs
    }
    admitted_pods: Counter[str] = Counter()
    for wl in snap.workloads:
        job = _owner_job(wl)
        if job:
            admitted_pods[job] += admitted_pods_of(wl)
    active_pods: Counter[str] = Counter()
    gpus_by_cq: Counter[str] = Counter()
    # A Job some other object controls (a JobSet's, a RayJob's submitter) is not queued on its
    # own: its pods are its owner's, counted per namespace (`namespace_gpus`), not here.
    children = {
        key_of(j)
        for j in snap.jobs
        if any(r.get("controller") for r in j["metadata"].get("ownerReferences") or [])
    }
    for pod in snap.pods:
        job = _owner_job(pod)
        if job is None or job in children or not active(pod):
            continue
        active_pods[job] += 1
        queue = queue_of_job.get(job)
        namespace = job.split("/")[0]
        if queue:
            gpus_by_cq[cq_of_lq.get(f"{namespace}/{queue}", "")] += pod_gpus(pod)
    for job, running in sorted(active_pods.items()):
        if running > admitted_pods[job]:
            found.append(
                Violation(
                    "pods-over-admission",
                    job,
                    f"{running} pods active, {admitted_pods[job]} admitted",
                )
            )
    for cq, gpus in sorted(gpus_by_cq.items()):
        if not cq:
            continue
        bound = sum(v for (_, res), v in limits.get(cq, {}).items() if res == names.GPU_RESOURCE)
        if gpus > bound:
            found.append(Violation("pods-over-quota", cq, f"{gpus} GPUs active > {bound} allowed"))
    for namespace in snap.gpu_namespaces:
        found += namespace_gpus(
            namespace, snap.workloads, snap.pods, nodes=snap.nodes, flavors=snap.flavors
        )
    return found


@dataclass
class History:
    """What the snapshots showed over time: admissions, evictions, double admissions."""

    first_admitted: dict[str, float] = field(default_factory=dict)
    admissions: dict[str, set[str]] = field(default_factory=lambda: defaultdict(set))
    evictions: dict[str, set[str]] = field(default_factory=lambda: defaultdict(set))
    double_admitted: set[str] = field(default_factory=set)

    def observe(self, workloads: Iterable[Obj], at: float) -> None:
        for wl in workloads:
            uid = str(wl["metadata"]["uid"])
            for c in status_of(wl).get("conditions") or []:
                stamp = str(c.get("lastTransitionTime", ""))
                if c.get("type") == names.COND_QUOTA_RESERVED and c.get("status") == "True":
                    self.admissions[uid].add(stamp)
                    self.first_admitted.setdefault(uid, at)
                elif c.get("type") == names.COND_EVICTED and c.get("status") == "True":
                    self.evictions[uid].add(stamp)
            if len(self.admissions[uid]) > len(self.evictions[uid]) + 1:
                self.double_admitted.add(key_of(wl))

    def first_admission_after(self, since: float) -> float | None:
        """When the first Workload not admitted before `since` was seen admitted."""
        later = [t for t in self.first_admitted.values() if t >= since]
        return min(later) if later else None


def request_json(
    api: k8s.ApiClient,
    method: str,
    path: str,
    body: Any = None,
    content_type: str = "application/json",
    headers: dict[str, str] | None = None,
) -> Obj:
    """One JSON call over `api`'s connection pool; a non-2xx answer raises ApiException.
    `headers` adds to the request's (Impersonate-User, to act as a plain user)."""
    response: Any = api.rest_client.request(  # type: ignore[no-untyped-call]
        method,
        f"{api.configuration.host}{path}",
        headers={"Accept": "application/json", "Content-Type": content_type, **(headers or {})},
        body=body,
        _request_timeout=30,
    )
    data = response.read()
    if not 200 <= response.status <= 299:
        error = ApiException(status=response.status, reason=response.reason)
        error.body = data.decode(errors="replace") if isinstance(data, bytes) else data
        raise error
    decoded: Obj = json.loads(data) if data else {}
    return decoded


class Sampler:
    """Snapshots `namespaces` every `interval` seconds in a thread; keeps what they showed.

    With `gpus_by_namespace`, it also reads nodes and ResourceFlavors and holds every GPU pod
    of those namespaces to what was admitted there, per flavor (`namespace_gpus`). `watch` swaps
    the namespaces while it runs; `seen_since` names what was seen after a moment.
    """

    LOG_LIMIT = 20_000

    def __init__(
        self,
        api: k8s.ApiClient,
        namespaces: Sequence[str],
        interval: float = 0.2,
        *,
        gpus_by_namespace: bool = False,
    ) -> None:
        self.api = api
        self.namespaces = list(namespaces)
        self.interval = interval
        self.gpus_by_namespace = gpus_by_namespace
        self.history = History()
        self.violations: dict[tuple[str, str], Violation] = {}
        self.log: list[tuple[float, Violation]] = []
        self.last_sample_at = 0.0
        self._lock = threading.Lock()
        self.samples = 0
        self.errors = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="invariants", daemon=True)

    def snapshot(self) -> Snapshot:
        """One read of everything `check` needs, from plain JSON (no model decoding)."""
        pods: list[Obj] = []
        jobs: list[Obj] = []
        wls: list[Obj] = []
        lqs: list[Obj] = []
        namespaces = list(self.namespaces)
        for ns in namespaces:  # pods first: see the module docstring
            pods += self._list(f"/api/v1/namespaces/{ns}/pods")
        for ns in namespaces:
            jobs += self._list(f"/apis/batch/v1/namespaces/{ns}/jobs")
            wls += self._list(f"/apis/{GROUP}/{VERSION}/namespaces/{ns}/workloads")
            lqs += self._list(f"/apis/{GROUP}/{VERSION}/namespaces/{ns}/localqueues")
        cqs = self._list(f"/apis/{GROUP}/{VERSION}/clusterqueues")
        if not self.gpus_by_namespace:
            return Snapshot(cqs, lqs, wls, jobs, pods)
        nodes = self._list("/api/v1/nodes")
        flavors = self._list(f"/apis/{GROUP}/{VERSION}/resourceflavors")
        return Snapshot(cqs, lqs, wls, jobs, pods, nodes, flavors, namespaces)

    def watch(self, namespaces: Sequence[str]) -> None:
        """From the next sample on, these namespaces instead."""
        self.namespaces = list(namespaces)

    def seen_since(self, since: float) -> list[Violation]:
        """Each violation seen in a sample that started at or after `since`, once."""
        with self._lock:
            found = {(v.kind, v.subject): v for at, v in self.log if at >= since}
        return list(found.values())

    def _list(self, path: str) -> list[Obj]:
        items: list[Obj] = request_json(self.api, "GET", path)["items"]
        return items

    def sample(self) -> list[Violation]:
        started = time.monotonic()
        snap = self.snapshot()
        self.history.observe(snap.workloads, time.monotonic())
        found = check(snap)
        with self._lock:
            for v in found:
                self.violations.setdefault((v.kind, v.subject), v)
                if len(self.log) < self.LOG_LIMIT:
                    self.log.append((started, v))
            self.samples += 1
            self.last_sample_at = started
        return found

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.sample()
            except Exception:  # the API server may be restarting: that is the point
                self.errors += 1
            self._stop.wait(self.interval)

    def findings(self) -> list[str]:
        """Every violation seen, one line each; a sampler that never sampled is one too."""
        found = [f"{v.kind} {v.subject}: {v.detail}" for v in self.violations.values()]
        if self.samples == 0:
            found.append(f"the invariant sampler never completed a sample ({self.errors} errors)")
        return found

    def start(self) -> Sampler:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)
