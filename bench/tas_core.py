"""The topology scenario's shape for the core bench (`python -m bench core --shape tas`).

bench/scenarios/tas.yaml without a cluster: 640 nodes (1 block x 10 racks x 64 nodes of 96 CPU
and 256 GiB, 110 pods) behind one flavor with a Topology (block, rack, hostname), the scale's
ClusterQueues (30 in 5 cohorts at small) with 20 CPU nominal and 100 borrowing each, reclaim
Any, LowerPriority. Workloads come in the scenario's nine classes: small (2 pods x 500m,
priority 50), medium (4 x 1250m, 100) and large (8 x 2500m, 200), each a third `required` rack,
a third `preferred` rack and a third slices of 1, 2 or 4 pods per rack, balanced, in the
scenario's per-queue counts. Quota is in millicores, as the controller feeds it. Runtimes are
the scenario's 200, 500 and 1,000 ms as 2, 5 and 10 cycles.

The nodes are never the limit (61,440 CPU against 3,600 CPU of quota with borrowing): every
evaluation places a gang on them, which is what this shape measures.
"""

from __future__ import annotations

import random

from queuectl.core import (
    ClusterQueue,
    Cohort,
    Flavor,
    FlavorQuotas,
    Node,
    PodSet,
    PreemptionPolicy,
    ResourceGroup,
    ResourceQuota,
    Scheduler,
    Topology,
    TopologyRequest,
    Workload,
)

GIB = 1024**3
BLOCK, RACK, HOST = (
    "topology.queuectl.io/block",
    "topology.queuectl.io/rack",
    "kubernetes.io/hostname",
)
RACKS, PER_RACK = 10, 64
NODE_ALLOCATABLE = {"cpu": 96_000, "memory": 256 * GIB, "pods": 110}
NOMINAL = 20  # CPU per queue, as the scenario's nominalQuota
BORROWING = 100

_REQUIRED = TopologyRequest(required=RACK)
_PREFERRED = TopologyRequest(preferred=RACK)


def _balanced(size: int) -> TopologyRequest:
    return TopologyRequest(slices=((RACK, size),), balanced=True)


# (pods, millicores per pod, priority, placement, per-queue count in the scenario)
CLASSES = [
    (2, 500, 50, _REQUIRED, 120),
    (2, 500, 50, _PREFERRED, 120),
    (2, 500, 50, _balanced(1), 110),
    (4, 1_250, 100, _REQUIRED, 34),
    (4, 1_250, 100, _PREFERRED, 33),
    (4, 1_250, 100, _balanced(2), 33),
    (8, 2_500, 200, _REQUIRED, 17),
    (8, 2_500, 200, _PREFERRED, 17),
    (8, 2_500, 200, _balanced(4), 16),
]
WEIGHTS = [c[-1] for c in CLASSES]
RUNTIME = {50: 2, 100: 5, 200: 10}
"""priority (one per size) -> cycles it runs"""
# CPU x cycles that one arrival brings, on average.
WORK = sum(pods * milli / 1000 * RUNTIME[prio] * n for pods, milli, prio, _, n in CLASSES) / sum(
    WEIGHTS
)


def build_tas(queues: int, cohorts: int) -> tuple[Scheduler, list[str]]:
    s = Scheduler()
    s.upsert_topology(Topology("tas", (BLOCK, RACK, HOST)))
    s.upsert_flavor(Flavor("tas", node_labels={"bench": "tas"}, topology_name="tas"))
    for r in range(RACKS):
        for n in range(PER_RACK):
            name = f"b0-r{r}-n{n:02}"
            labels = {"bench": "tas", BLOCK: "b0", RACK: f"b0-r{r}", HOST: name}
            s.upsert_node(Node(name, labels, dict(NODE_ALLOCATABLE)))
    for c in range(cohorts):
        s.upsert_cohort(Cohort(f"dept-{c}"))
    names = []
    for i in range(queues):
        name = f"team-{i:04}"
        names.append(name)
        quota = ResourceQuota("cpu", NOMINAL * 1000, borrowing_limit=BORROWING * 1000)
        s.upsert_cluster_queue(
            ClusterQueue(
                name,
                f"dept-{i % cohorts}",
                (ResourceGroup(("cpu",), (FlavorQuotas("tas", (quota,)),)),),
                preemption=PreemptionPolicy(
                    reclaim_within_cohort="Any", within_cluster_queue="LowerPriority"
                ),
            )
        )
    return s, names


def tas_workload(seq: int, queues: list[str], rnd: random.Random, now: float) -> Workload:
    pods, milli, priority, request, _ = rnd.choices(CLASSES, WEIGHTS)[0]
    return Workload(
        key=f"ns-{seq % 97}/job-{seq:07}",
        cluster_queue=rnd.choice(queues),
        podsets=(PodSet("main", pods, {"cpu": milli}, topology=request),),
        priority=priority,
        created=now + seq * 1e-6,
    )
