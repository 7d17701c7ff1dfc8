"""What the JobSet and TrainJob e2e modules share: a pool of GPU nodes of their own, its queue,
and the checks and preemption story of a gang of 4 pods x 8 GPUs run through JobSet's child
Jobs (a TrainJob becomes a JobSet of its name, so both kinds' pods carry the JobSet label).

The pool: 2 racks x 4 nodes x 8 GPUs, labelled and tainted, behind a flavor that selects and
tolerates it, so other modules' nodes never count and no other pod lands there. The gang fits
either rack but not spread: all four pods in one rack shows the rack reached every pod.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from e2e.harness import (
    WL,
    apply,
    cluster_queue,
    condition,
    get,
    is_true,
    items,
    local_queue,
    low_and_high,
    notice_and_deadline,
    topology,
    wait_for,
)
from queuectl.api import names
from queuectl.testenv.cluster import Cluster
from queuectl.testenv.nodes import H100

FLEET_LABEL = "e2e.queuectl.io/fleet"
POD_LABEL = "jobset.sigs.k8s.io/jobset-name"
GRACE = 6

Obj = dict[str, Any]
MakeGang = Callable[..., Obj]
"""make(name, namespace, *, priority=None, runs_for=None): the kind's gang of 4 x 8 GPUs."""


@dataclass(frozen=True)
class GangPool:
    fleet: str
    """The pool's label value (and a node name prefix's source)."""
    kind: str
    """As kubectl names it: "jobset", "trainjob"."""
    owner: str
    """The Workload's owner kind: "JobSet", "TrainJob"."""
    timeout: float = 60.0

    @property
    def taint(self) -> Obj:
        return {"key": FLEET_LABEL, "value": self.fleet, "effect": "NoSchedule"}

    @property
    def toleration(self) -> Obj:
        return {
            "key": FLEET_LABEL,
            "operator": "Equal",
            "value": self.fleet,
            "effect": "NoSchedule",
        }

    def add_nodes(self, cluster: Cluster, prefix: str) -> list[str]:
        nodes = cluster.add_gpu_nodes(
            8,
            8,
            H100,
            blocks=1,
            racks_per_block=2,
            name_prefix=prefix,
            labels={FLEET_LABEL: self.fleet},
            taints=[self.taint],
        )
        return [n.name for n in nodes]

    def remove_nodes(self, cluster: Cluster) -> None:
        cluster.kubectl("delete", "node", "-l", f"{FLEET_LABEL}={self.fleet}", "--wait=false")

    def setup_queue(self, cluster: Cluster, namespace: str, gpus: int, **spec: Any) -> None:
        """A ClusterQueue over the pool's H100 flavor with block/rack/host topology; LocalQueue
        `lq`, and a default LocalQueue (it must queue the kind, never its child Jobs)."""
        topo, fl, cq = f"topo-{namespace}", f"h100-{namespace}", f"cq-{namespace}"
        levels = (names.LABEL_TOPOLOGY_BLOCK, names.LABEL_TOPOLOGY_RACK, names.LABEL_HOSTNAME)
        apply(
            cluster,
            topology(topo, *levels),
            {
                "apiVersion": names.API_VERSION,
                "kind": "ResourceFlavor",
                "metadata": {"name": fl},
                "spec": {
                    "nodeLabels": {names.LABEL_GPU_PRODUCT: H100, FLEET_LABEL: self.fleet},
                    "tolerations": [self.toleration],
                    "topologyName": topo,
                },
            },
            cluster_queue(cq, namespace, {fl: gpus}, **spec),
            local_queue("lq", namespace, cq),
            local_queue("default", namespace, cq),
        )

    def workload_of(self, cluster: Cluster, namespace: str, name: str) -> Obj | None:
        for wl in items(cluster, WL, namespace):
            refs = wl["metadata"].get("ownerReferences") or []
            if any(r.get("kind") == self.owner and r.get("name") == name for r in refs):
                return wl
        return None

    def admitted(self, cluster: Cluster, namespace: str, name: str) -> bool:
        wl = self.workload_of(cluster, namespace, name)
        return wl is not None and is_true(wl, names.COND_ADMITTED) and not is_true(wl, "Finished")

    def running_pods(self, cluster: Cluster, namespace: str, name: str) -> list[Obj]:
        return [
            p
            for p in items(cluster, "pods", namespace, "-l", f"{POD_LABEL}={name}")
            if (p.get("status") or {}).get("phase") == "Running"
            and not p["metadata"].get("deletionTimestamp")
        ]

    def four_running_in_one_rack(self, cluster: Cluster, namespace: str, name: str) -> str:
        """Wait for the gang's 4 pods to run; they are on 4 nodes of this pool, all in one rack
        (returned), and each carries the placement queuectl gave the kind."""
        pods = wait_for(
            f"{name}: 4 pods running",
            lambda: len(p := self.running_pods(cluster, namespace, name)) == 4 and p,
            timeout=self.timeout + 30,
        )
        nodes = [get(cluster, "node", p["spec"]["nodeName"]) for p in pods]
        assert {n["metadata"]["labels"].get(FLEET_LABEL) for n in nodes} == {self.fleet}
        assert len({n["metadata"]["name"] for n in nodes}) == 4
        racks = {n["metadata"]["labels"][names.LABEL_TOPOLOGY_RACK] for n in nodes}
        assert len(racks) == 1, racks
        (rack,) = racks
        workload = (self.workload_of(cluster, namespace, name) or {})["metadata"]["name"]
        for pod in pods:
            assert pod["spec"]["nodeSelector"][names.LABEL_TOPOLOGY_RACK] == rack
            assert self.toleration in pod["spec"]["tolerations"]
            assert pod["metadata"]["labels"][names.LABEL_WORKLOAD] == workload
        return str(rack)

    def child_jobs(self, cluster: Cluster, namespace: str, name: str) -> list[Obj]:
        return items(cluster, "jobs", namespace, "-l", f"{POD_LABEL}={name}")

    def child_jobs_suspended(self, cluster: Cluster, namespace: str, name: str) -> bool:
        jobs = self.child_jobs(cluster, namespace, name)
        return bool(jobs) and all(j["spec"].get("suspend") for j in jobs)

    def preempted_with_grace_then_requeued_and_readmitted(
        self,
        cluster: Cluster,
        namespace: str,
        make: MakeGang,
        restored: Callable[[Obj], None],
    ) -> None:
        """The preemption story: a low-priority gang runs; a high-priority one arrives. The
        victim gets its notice (Preempted, a deadline) and keeps running until the deadline;
        then it is suspended, its pods stop, it is requeued with queuectl's placement taken
        back out (`restored` checks the kind's templates), the preemptor runs in one rack,
        and once it is gone the victim runs again, whole."""
        low, high = low_and_high(cluster, namespace, GRACE)
        self.setup_queue(cluster, namespace, 32, preemption={"withinClusterQueue": "LowerPriority"})
        apply(cluster, make("victim", namespace, priority=low))
        wait_for("victim admitted", lambda: self.admitted(cluster, namespace, "victim"))
        self.four_running_in_one_rack(cluster, namespace, "victim")
        apply(cluster, make("urgent", namespace, priority=high))

        wl, noticed, deadline = notice_and_deadline(
            lambda: self.workload_of(cluster, namespace, "victim"),
            lambda: get(cluster, self.kind, "victim", namespace),
            self.owner,
        )
        assert (condition(wl, names.COND_PREEMPTED) or {}).get("reason") == (
            names.REASON_PREEMPTED_WITHIN_CQ
        )
        assert deadline - noticed > GRACE / 2
        assert len(self.running_pods(cluster, namespace, "victim")) == 4
        assert not get(cluster, self.kind, "victim", namespace)["spec"].get("suspend")
        assert not self.admitted(cluster, namespace, "urgent")

        wait_for(
            "victim suspended after its deadline",
            lambda: get(cluster, self.kind, "victim", namespace)["spec"].get("suspend"),
            timeout=GRACE + 30,
        )
        assert time.time() >= deadline - 1
        wait_for(
            "victim requeued",
            lambda: is_true(self.workload_of(cluster, namespace, "victim"), names.COND_REQUEUED),
            timeout=self.timeout,
        )
        assert self.child_jobs_suspended(cluster, namespace, "victim")
        assert self.running_pods(cluster, namespace, "victim") == []
        back = get(cluster, self.kind, "victim", namespace)
        restored(back)
        assert names.ANNOTATION_PREEMPTION_DEADLINE not in (
            back["metadata"].get("annotations") or {}
        )
        wait_for(
            "urgent admitted",
            lambda: self.admitted(cluster, namespace, "urgent"),
            timeout=self.timeout,
        )
        self.four_running_in_one_rack(cluster, namespace, "urgent")

        cluster.kubectl("delete", self.kind, "urgent", "-n", namespace)
        wait_for(
            "victim re-admitted",
            lambda: self.admitted(cluster, namespace, "victim"),
            timeout=self.timeout,
        )
        self.four_running_in_one_rack(cluster, namespace, "victim")
