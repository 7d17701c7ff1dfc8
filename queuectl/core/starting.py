"""All-or-nothing start (block admission): one gang at a time starts in a flavor.

Two gangs admitted side by side into one flavor can each get part of their pods placed and
wait for ever for the rest (each holds the nodes the other needs). So, with block admission
on, while a workload holding quota in flavor F is `starting` (its pods not yet all Ready: the
controller feeds that from the Workload's PodsReady condition), nothing else is admitted into
F: a candidate whose decision (an admission, or a preemption for it) uses F waits, with reason
WaitingForPodsReady naming the starting workload. Other flavors go on. Kueue's blockAdmission
blocks every admission while any workload starts; per flavor keeps unrelated hardware busy.

A starting workload holds its flavors when its own queue asks for it (its
`ClusterQueue.block_admission`, else the scheduler's default), for candidates of every queue:
the controller writes PodsReady only where a queue's rules track it, so a queue that does not
ask may never hear that its workloads are Ready. The starting workload's startup timeout
bounds the wait: a gang that never gets Ready is evicted, which frees its flavors.

This module keeps the index (which flavors each starting workload holds), from the
scheduler's inputs and from admissions made in a cycle (a workload the core just admitted is
starting until the controller says otherwise); `start_gate` holds candidates back in the
cycle. Off, the index is still kept (cheap) and nothing else runs: decisions are the same as
without it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from queuectl.core.queues import Bucket, Shape
from queuectl.core.types import Admission, ClusterQueue, Workload


@dataclass(slots=True)
class Starts:
    default: bool = False
    """Block admission for queues that do not say (the controller's flag)."""
    on: bool = False
    """`default`, or some queue turns it on: otherwise no candidate is ever checked."""
    by_key: dict[str, frozenset[str]] = field(default_factory=dict)
    """Starting workload -> the flavors it holds."""
    by_flavor: dict[str, set[str]] = field(default_factory=dict)
    waiting: dict[tuple[str, Shape], tuple[Bucket, str, frozenset[str]]] = field(
        default_factory=dict
    )
    """(queue, shape) -> (its parked bucket, the candidate, the flavors it needs): the
    candidates held back, woken by `start_gate.wake`."""

    def note(self, key: str, flavors: frozenset[str]) -> None:
        """`key` holds `flavors` while it starts (empty: it holds none: ready, gone, requeued)."""
        old = self.by_key.pop(key, frozenset())
        for f in old - flavors:
            keys = self.by_flavor.get(f)
            if keys is not None:
                keys.discard(key)
                if not keys:
                    del self.by_flavor[f]
        if flavors:
            self.by_key[key] = flavors
            for f in flavors - old:
                self.by_flavor.setdefault(f, set()).add(key)

    def configure(self, default: bool, queues: dict[str, ClusterQueue]) -> None:
        self.default = default
        self.on = default or any(q.block_admission for q in queues.values())


def flavors_of(admission: Admission) -> frozenset[str]:
    return frozenset(f for ps in admission.podsets for f in ps.flavors.values())


def note_workload(starts: Starts, w: Workload) -> None:
    """The scheduler's input for `w`: it holds its admission's flavors while starting."""
    if w.starting and w.admission is not None:
        starts.note(w.key, flavors_of(w.admission))
    else:
        starts.note(w.key, frozenset())


def _blocks(starts: Starts, queues: dict[str, ClusterQueue], cq: str) -> bool:
    spec = queues.get(cq)
    own = spec.block_admission if spec is not None else None
    return starts.default if own is None else own


def holder(
    starts: Starts,
    queues: dict[str, ClusterQueue],
    workloads: dict[str, Workload],
    key: str,
    flavors: frozenset[str],
) -> tuple[str, str] | None:
    """(flavor, starting workload) that makes candidate `key` wait for `flavors`; None: it
    may go on."""
    for f in sorted(flavors):
        for other in sorted(starts.by_flavor.get(f, ())):
            if other == key:
                continue
            w = workloads.get(other)
            if w is not None and _blocks(starts, queues, w.cluster_queue):
                return f, other
    return None
