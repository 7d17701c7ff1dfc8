"""The invariants a fault must never break, checked from what the API server holds.

`check(snapshot)` is pure: given ClusterQueues, LocalQueues, Workloads, Jobs and Pods as the API
returns them, it names every broken invariant:

- `quota`: a ClusterQueue's admitted usage (Workloads with QuotaReserved, not Finished) exceeds
  nominal + what it may borrow, per flavor and resource;
- `pods-over-quota`: the GPUs that a ClusterQueue's active pods request exceed the same bound
  summed over its flavors (what actually runs, whatever the Workloads say);
- `pods-over-admission`: a Job runs more pods than its Workload admitted (none when not admitted);
- `two-admitted-workloads`: one Job owns two admitted Workloads.

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


@dataclass(frozen=True)
class Violation:
    kind: str
    subject: str
    detail: str


def _spec(obj: Obj) -> Obj:
    return obj.get("spec") or {}


def _status(obj: Obj) -> Obj:
    return obj.get("status") or {}


def _true(obj: Obj, type_: str) -> bool:
    return any(
        c.get("type") == type_ and c.get("status") == "True"
        for c in _status(obj).get("conditions") or []
    )


def _key(obj: Obj) -> str:
    meta = obj["metadata"]
    return f"{meta.get('namespace', '')}/{meta['name']}".lstrip("/")


def quota_limits(cluster_queues: Sequence[Obj]) -> dict[str, dict[tuple[str, str], int]]:
    """(flavor, resource) -> nominal + borrowable, per ClusterQueue.

    Borrowable is bounded by `borrowingLimit` and by what the other ClusterQueues of the same
    cohort lend (`lendingLimit`, else their nominal quota). Cohorts' own quota is not counted,
    so with cohort quota this bound is too low, never too high: the suites use none.
    """
    nominal: dict[str, dict[tuple[str, str], tuple[int, int, int]]] = {}
    for cq in cluster_queues:
        own: dict[tuple[str, str], tuple[int, int, int]] = {}
        for group in _spec(cq).get("resourceGroups") or []:
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
    cohort_of = {cq["metadata"]["name"]: _spec(cq).get("cohortName") for cq in cluster_queues}
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


def _admission_usage(wl: Obj) -> Counter[tuple[str, str]]:
    used: Counter[tuple[str, str]] = Counter()
    for psa in (_status(wl).get("admission") or {}).get("podSetAssignments") or []:
        flavors = psa.get("flavors") or {}
        for res, qty in (psa.get("resourceUsage") or {}).items():
            used[(str(flavors.get(res, "")), res)] += canonical(res, qty)
    return used


def _admitted_pods(wl: Obj) -> int:
    admission = _status(wl).get("admission") or {}
    return sum(int(psa.get("count") or 0) for psa in admission.get("podSetAssignments") or [])


def _holds_quota(wl: Obj) -> bool:
    return bool(_status(wl).get("admission")) and not _true(wl, names.COND_FINISHED)


def _active(pod: Obj) -> bool:
    """A pod that holds its node's resources: bound, not terminal, not being deleted."""
    return (
        bool(_spec(pod).get("nodeName"))
        and _status(pod).get("phase") not in ("Succeeded", "Failed")
        and not pod["metadata"].get("deletionTimestamp")
    )


def _pod_gpus(pod: Obj) -> int:
    total = 0
    for c in _spec(pod).get("containers") or []:
        requests = (c.get("resources") or {}).get("requests") or {}
        total += canonical(names.GPU_RESOURCE, requests.get(names.GPU_RESOURCE, 0))
    return total


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
        if _holds_quota(wl):
            usage[str(_status(wl)["admission"].get("clusterQueue", ""))] += _admission_usage(wl)
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

    cq_of_lq = {_key(lq): str(_spec(lq).get("clusterQueue", "")) for lq in snap.local_queues}
    queue_of_job = {
        _key(j): (j["metadata"].get("labels") or {}).get(names.LABEL_QUEUE_NAME) for j in snap.jobs
    }
    admitted_pods: Counter[str] = Counter()
    for wl in snap.workloads:
        job = _owner_job(wl)
        if job:
            admitted_pods[job] += _admitted_pods(wl)
    active_pods: Counter[str] = Counter()
    gpus_by_cq: Counter[str] = Counter()
    for pod in snap.pods:
        job = _owner_job(pod)
        if job is None or not _active(pod):
            continue
        active_pods[job] += 1
        queue = queue_of_job.get(job)
        namespace = job.split("/")[0]
        if queue:
            gpus_by_cq[cq_of_lq.get(f"{namespace}/{queue}", "")] += _pod_gpus(pod)
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
            for c in _status(wl).get("conditions") or []:
                stamp = str(c.get("lastTransitionTime", ""))
                if c.get("type") == names.COND_QUOTA_RESERVED and c.get("status") == "True":
                    self.admissions[uid].add(stamp)
                    self.first_admitted.setdefault(uid, at)
                elif c.get("type") == names.COND_EVICTED and c.get("status") == "True":
                    self.evictions[uid].add(stamp)
            if len(self.admissions[uid]) > len(self.evictions[uid]) + 1:
                self.double_admitted.add(_key(wl))

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
) -> Obj:
    """One JSON call over `api`'s connection pool; a non-2xx answer raises ApiException."""
    response: Any = api.rest_client.request(  # type: ignore[no-untyped-call]
        method,
        f"{api.configuration.host}{path}",
        headers={"Accept": "application/json", "Content-Type": content_type},
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
    """Snapshots `namespaces` every `interval` seconds in a thread; keeps what they showed."""

    def __init__(
        self, api: k8s.ApiClient, namespaces: Sequence[str], interval: float = 0.2
    ) -> None:
        self.api = api
        self.namespaces = list(namespaces)
        self.interval = interval
        self.history = History()
        self.violations: dict[tuple[str, str], Violation] = {}
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
        for ns in self.namespaces:  # pods first: see the module docstring
            pods += self._list(f"/api/v1/namespaces/{ns}/pods")
        for ns in self.namespaces:
            jobs += self._list(f"/apis/batch/v1/namespaces/{ns}/jobs")
            wls += self._list(f"/apis/{GROUP}/{VERSION}/namespaces/{ns}/workloads")
            lqs += self._list(f"/apis/{GROUP}/{VERSION}/namespaces/{ns}/localqueues")
        cqs = self._list(f"/apis/{GROUP}/{VERSION}/clusterqueues")
        return Snapshot(cqs, lqs, wls, jobs, pods)

    def _list(self, path: str) -> list[Obj]:
        items: list[Obj] = request_json(self.api, "GET", path)["items"]
        return items

    def sample(self) -> list[Violation]:
        snap = self.snapshot()
        self.history.observe(snap.workloads, time.monotonic())
        found = check(snap)
        for v in found:
            self.violations.setdefault((v.kind, v.subject), v)
        self.samples += 1
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
