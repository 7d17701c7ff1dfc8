"""What the core knows: specs, the quota tree, admitted charges and per-node usage.

`State` owns every mutation of usage, so the tree and the per-node counts can never disagree with
the set of charges. Assignment and preemption read it and simulate on it (apply/unapply), always
restoring what they touched before they return. A charge and its victim rank are `charges.py`;
the answers remembered beside the state are `caches.py`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from queuectl.core.bank import Ledger
from queuectl.core.caches import Caches
from queuectl.core.charges import Charge
from queuectl.core.node_index import ChangeLog, same_place
from queuectl.core.notes import WakeNotes
from queuectl.core.quota import QNode, add_usage, available_then
from queuectl.core.topology import NodeUse, add_use, node_capacity, tolerated
from queuectl.core.tree import Tree, build
from queuectl.core.types import (
    AdmissionCheck,
    ClusterQueue,
    Cohort,
    FairPreemptionStrategy,
    Flavor,
    FlavorResource,
    Node,
    PodSet,
    Topology,
    Workload,
)


@dataclass(slots=True)
class State:
    flavors: dict[str, Flavor] = field(default_factory=dict)
    topologies: dict[str, Topology] = field(default_factory=dict)
    cohorts: dict[str, Cohort] = field(default_factory=dict)
    queues: dict[str, ClusterQueue] = field(default_factory=dict)
    checks: dict[str, AdmissionCheck] = field(default_factory=dict)
    nodes: dict[str, Node] = field(default_factory=dict)
    capacity: dict[str, dict[str, int]] = field(default_factory=dict)
    workloads: dict[str, Workload] = field(default_factory=dict)
    charges: dict[str, Charge] = field(default_factory=dict)
    by_cq: dict[str, dict[str, Charge]] = field(default_factory=dict)
    held_for: dict[str, list[Charge]] = field(default_factory=dict)
    """preemptor -> the charges still counted for it until it is admitted: its victims already
    gone, and its reservation"""
    queue_holds: dict[str, dict[FlavorResource, int]] = field(default_factory=dict)
    """queue -> the part of its usage that is held for preemptors (`held_for`), not running
    work of its own"""
    victim_of: dict[str, str] = field(default_factory=dict)
    """victim -> preemptor, while the victim drains"""
    evicting: set[str] = field(default_factory=set)
    """admitted workloads already told to stop (drain, max execution time)"""
    node_used: NodeUse = field(default_factory=dict)
    node_log: ChangeLog = field(default_factory=ChangeLog)
    """The nodes whose `node_used` changed, in order (for `Caches.placement`)."""
    tree: Tree = field(default_factory=Tree)
    stale_tree: bool = True
    borrowers: dict[QNode, dict[FlavorResource, set[str]]] = field(default_factory=dict)
    """root -> (flavor, resource) -> queues using more than their own quota of it (the only
    queues reclaim may take from): a victim search visits just the ones it is short of"""
    wake: WakeNotes = field(default_factory=WakeNotes)
    """What changed since parked work was last looked at (`parking.wake` reads and resets it)."""
    cache: Caches = field(default_factory=Caches)
    """Answers remembered while what they depend on is unchanged; none of it is state."""
    in_cycle: bool = False
    """Inside an admission loop (`begin_loop`..`end_loop`): the loop-only memos are kept."""
    pooling: bool = False
    """Settling nominations before the loop: victim pools are memoised (`candidates.usable_pool`) as
    in the loop; `begin_loop` clears them."""
    usage_at_loop_start: dict[QNode, dict[FlavorResource, int]] = field(default_factory=dict)
    """node -> its usage before the running admission loop first changed it (kept only while
    `in_cycle`): what could be taken when the loop began"""
    bank: Ledger = field(default_factory=Ledger)
    """GPU time banking: the balances of queues with a bank (`queuectl.core.bank`)."""
    fair_strategies: tuple[FairPreemptionStrategy, ...] = ()
    """Fair-sharing preemption's rules, in the order tried; empty: off (`fair_preempt`)."""
    claims: dict[str, tuple[str, dict[FlavorResource, int]]] = field(default_factory=dict)
    """nominated preemptor -> (its queue, what it needs): quota it will hold once admitted,
    which fair shares count before it is (`fair_preempt`)"""

    # --- tree -------------------------------------------------------------------------------
    def ensure_tree(self) -> None:
        if not self.stale_tree:
            return
        self.tree = build(self.cohorts, self.queues, self.flavors, self.checks)
        self.bank.configure(self.queues)
        self.borrowers.clear()
        for charge in self.charges.values():
            self._tree_usage(charge, 1)
        for charges in self.held_for.values():
            for charge in charges:
                self._tree_usage(charge, 1)
        self.stale_tree = False
        self.wake.all_dirty = True
        self.wake.dirty_roots.clear()

    def _tree_usage(self, charge: Charge, sign: int, mark: bool = True) -> None:
        node = self.tree.queues.get(charge.cq)
        if node is None:
            return
        if mark and self.in_cycle:
            saved = self.usage_at_loop_start
            up: QNode | None = node
            while up is not None and up not in saved:
                saved[up] = dict(up.usage)
                up = up.parent
        for fr, v in charge.usage.items():
            add_usage(node, fr, sign * v)
        root = node.root
        notes = self.wake
        by_fr = self.borrowers.setdefault(root, {})
        for fr in charge.usage:
            if node.borrows(fr):
                names = by_fr.setdefault(fr, set())
                if mark and node.name not in names:
                    notes.borrow_epoch[root] = notes.borrow_epoch.get(root, 0) + 1
                names.add(node.name)
            else:
                gone = by_fr.get(fr)
                if gone is not None:
                    gone.discard(node.name)
        if sign > 0 and mark:
            notes.grown.setdefault(root, set()).update(charge.usage)
            holds = self.queue_holds.get(node.name)
            for fr, v in charge.usage.items():
                aside = holds.get(fr, 0) if holds else 0
                if node.borrows(fr, -aside) and not node.borrows(fr, -aside - v):
                    self.cache.cross_epoch[root] = self.cache.cross_epoch.get(root, 0) + 1
                    break
            self.note_new_work(node, charge)
            notes.taken[node.name] = notes.taken.get(node.name, 0) + 1
        if sign < 0 and mark:
            notes.released[node.name] = notes.released.get(node.name, 0) + 1
            notes.released_since.add(node.name)
            notes.dirty_roots.add(root)
            freed = notes.freed.setdefault(root, {})
            for fr, v in charge.usage.items():
                freed[fr] = freed.get(fr, 0) + v

    def note_new_work(self, node: QNode, charge: Charge) -> None:
        """For the next wake: new in-queue candidates (the lowest priority admitted) and what
        the queue, or a cohort above it, now takes beyond its own quota (older work below it
        may be reclaimed: a cohort going over its quota opens its borrowers to reclaim from the
        rest of the tree, `reach`)."""
        low = self.wake.admitted_low.get(node.name)
        if low is None or charge.priority < low:
            self.wake.admitted_low[node.name] = charge.priority
        for fr in charge.usage:
            up: QNode | None = node
            while up is not None and up.parent is not None:  # a root never borrows
                if up.borrows(fr):
                    self.wake.borrowed.setdefault(node.root, set()).add(fr)
                    break
                up = up.parent

    def root_of(self, cq: str) -> QNode | None:
        node = self.tree.queues.get(cq)
        return node.root if node is not None else None

    # --- usage ------------------------------------------------------------------------------
    def apply(self, charge: Charge, sign: int = 1, mark: bool = True) -> None:
        """Add (sign=1) or take away (sign=-1) a charge's usage, in the tree and on nodes.

        Taking usage away marks its tree (and the nodes) as changed so that parked workloads
        are looked at again; simulations pass `mark=False` since they put it back.
        """
        self._tree_usage(charge, sign, mark)
        add_use(self.node_used, charge.nodes, sign)
        if charge.nodes:
            self.node_log.add(charge.nodes)
        if sign < 0 and charge.nodes and mark:
            self.wake.nodes_freed = True

    def preemptible(self, cq: str, now: float) -> tuple[list[Charge], list[Charge]]:
        """A queue's admitted work split into (preemptible by age, protected in the order it
        comes of age) at `now`. Work admitted at `now` (this very cycle) is in neither: never
        stop what just started."""
        if self.cache.old_work_at != now:
            self.cache.old_work.clear()
            self.cache.old_work_at = now
        cached = self.cache.old_work.get(cq)
        if cached is None:
            old: list[Charge] = []
            protected: list[Charge] = []
            for c in self.by_cq.get(cq, {}).values():
                if c.admitted_at >= now:
                    continue
                (protected if now < c.admitted_at + c.min_runtime else old).append(c)
            protected.sort(key=lambda c: c.admitted_at + c.min_runtime)
            cached = self.cache.old_work[cq] = (old, protected)
        return cached

    def mark_victim(self, victim: Charge, preemptor: str) -> None:
        self.victim_of[victim.key] = preemptor
        self.cache.usable_memo.pop(victim.cq, None)

    def begin_loop(self) -> None:
        """An admission loop starts: loop-only memos and the loop-start usages begin empty."""
        self.end_loop()
        self.in_cycle = True

    def end_loop(self) -> None:
        self.in_cycle = False
        self.cache.no_cross.clear()
        self.cache.usable_memo.clear()
        self.usage_at_loop_start.clear()

    def fitted_when_loop_began(self, node: QNode, need: dict[FlavorResource, int]) -> bool:
        """Would `need` have fit in what the queue could take before this admission loop changed
        any usage in its tree? (Then work admitted in the loop took its fit, not work older than
        the loop: the cycle tries it again before preempting for it.)"""
        then = self.usage_at_loop_start
        if node.root not in then:
            return False  # nothing changed in the tree: it did not fit then either
        if all(n <= available_then(node, fr, then) for fr, n in need.items()):
            return True
        # `need` is in the flavors it would preempt in; another flavor of its queue may have
        # held it (a100 free, taken in the loop; then h100 by preemption): the same amounts,
        # per resource group, in any one of the group's flavors.
        spec = self.queues.get(node.name)
        if spec is None:
            return False
        for rg in spec.resource_groups:
            amounts: dict[str, int] = {}
            for (_, res), n in need.items():
                if res in rg.covered_resources:
                    amounts[res] = amounts.get(res, 0) + n
            if amounts and not any(
                all(n <= available_then(node, (f.name, r), then) for r, n in amounts.items())
                for f in rg.flavors
            ):
                return False
        return True

    def admit(self, charge: Charge) -> None:
        self.cache.old_work.pop(charge.cq, None)
        self.charges[charge.key] = charge
        self.by_cq.setdefault(charge.cq, {})[charge.key] = charge
        self.apply(charge, 1)

    def drop(self, key: str) -> Charge | None:
        """Forget an admitted workload's charge without touching usage (caller decides)."""
        charge = self.charges.pop(key, None)
        if charge is not None:
            self.cache.old_work.pop(charge.cq, None)
            admitted = self.by_cq.get(charge.cq)
            if admitted is not None:
                admitted.pop(key, None)
                if not admitted:
                    del self.by_cq[charge.cq]
        return charge

    def hold(self, preemptor: str, charge: Charge, counted: bool, mark: bool = True) -> None:
        """Keep `charge` counted for `preemptor` (apply it first unless already `counted`;
        `mark=False`: it takes back what an unmarked `release_held` just gave back)."""
        self.held_for.setdefault(preemptor, []).append(charge)
        holds = self.queue_holds.setdefault(charge.cq, {})
        for fr, v in charge.usage.items():
            holds[fr] = holds.get(fr, 0) + v
        if not counted:
            self.apply(charge, 1, mark)

    def release_held(self, preemptor: str, mark: bool = True) -> list[Charge]:
        """Stop holding anything for `preemptor`; returns what it held. `mark=False` when the
        caller holds at least as much again at once (nothing is freed for others)."""
        released = self.held_for.pop(preemptor, [])
        for charge in released:
            holds = self.queue_holds.get(charge.cq, {})
            for fr, v in charge.usage.items():
                left = holds.get(fr, 0) - v
                if left > 0:
                    holds[fr] = left
                else:
                    holds.pop(fr, None)
            if not holds:
                self.queue_holds.pop(charge.cq, None)
            self.apply(charge, -1, mark)
        return released

    def own_usage(self, node: QNode, fr: FlavorResource) -> int:
        """A queue's usage without what it holds for others' preemptors."""
        return node.usage.get(fr, 0) - self.queue_holds.get(node.name, {}).get(fr, 0)

    # --- nodes ------------------------------------------------------------------------------
    def set_node(self, node: Node | None, name: str) -> None:
        old = self.nodes.get(name)
        if node is None:
            self.nodes.pop(name, None)
            self.capacity.pop(name, None)
        else:
            self.nodes[name] = node
            self.capacity[name] = node_capacity(node)
        self.cache.flavor_nodes.clear()
        if old is not None and node is not None and same_place(old, node):
            self.node_log.add((name,))  # only what it holds changed: indexes re-count it
        else:
            self.cache.placement.clear()
        self.wake.nodes_dirty = True

    def nodes_for(self, flavor: Flavor, ps: PodSet) -> list[Node]:
        """Schedulable nodes of a flavor that also match the pod set's selector and tolerations."""
        base = self.cache.flavor_nodes.get(flavor.name)
        if base is None:
            base = [
                n
                for _, n in sorted(self.nodes.items())
                if not n.unschedulable
                and all(n.labels.get(k) == v for k, v in flavor.node_labels.items())
            ]
            self.cache.flavor_nodes[flavor.name] = base
        tols = flavor.tolerations + ps.tolerations
        return [
            n
            for n in base
            if all(n.labels.get(k) == v for k, v in ps.node_selector.items())
            and tolerated(n.taints, tols)
        ]
