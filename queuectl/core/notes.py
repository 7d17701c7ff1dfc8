"""What changed since parked work was last looked at: the record that events write and
`parking.wake` reads (kept apart from `State` so that it reads as one thing)."""

from __future__ import annotations

from dataclasses import dataclass, field

from queuectl.core.quota import QNode
from queuectl.core.types import FlavorResource


@dataclass(slots=True)
class WakeNotes:
    """The one parking record: what events changed since the last `parking.wake`, so that it
    wakes only the parked buckets those changes could help. Usage changes write it
    (`State._tree_usage`), spec and node changes set the flags; `parking.wake` reads it and calls
    `woken`. The counters only grow: a parked bucket remembers the values it saw."""

    all_dirty: bool = True
    """Wake every parked bucket (a spec or topology changed, or the tree was rebuilt)."""
    nodes_dirty: bool = False
    """Nodes changed (added, removed, relabelled, tainted): any placement may differ."""
    nodes_freed: bool = False
    """Room was freed on nodes (work that held it went): wake buckets that failed on node
    placement, and waiters whose answer read the room (`Waiting.needs_room`)."""
    dirty_roots: set[QNode] = field(default_factory=set)
    """Trees where quota was freed since the last wake."""
    borrowed: dict[QNode, set[FlavorResource]] = field(default_factory=dict)
    """root -> what someone in the tree took while over its own quota since the last wake (new
    reclaim candidates for parked work short of it)"""
    grown: dict[QNode, set[FlavorResource]] = field(default_factory=dict)
    """root -> (flavor, resource)s whose usage grew since the last wake: work parked after a
    flavor of it was chosen for one part may choose another flavor now, and fit or preempt"""
    admitted_low: dict[str, int] = field(default_factory=dict)
    """queue -> lowest priority it admitted since the last wake (new in-queue candidates)"""
    released_since: set[str] = field(default_factory=set)
    """queues that freed quota of their own since the last wake"""
    # Counters (never reset):
    freed: dict[QNode, dict[FlavorResource, int]] = field(default_factory=dict)
    """root -> cumulative usage taken away per (flavor, resource): parked work waits on it"""
    borrow_epoch: dict[QNode, int] = field(default_factory=dict)
    """root -> how many times a queue started borrowing something (reclaim candidates appear)"""
    released: dict[str, int] = field(default_factory=dict)
    """queue -> how many times quota it held was freed (parked work of its own re-evaluates)"""
    taken: dict[str, int] = field(default_factory=dict)
    """queue -> how many times its usage grew (parked work of its own that did not borrow may
    borrow now, see `Bucket.borrowing_helps`)"""

    def woken(self) -> None:
        """Parked work has been looked at: forget what changed since the last wake."""
        self.all_dirty = self.nodes_dirty = self.nodes_freed = False
        self.dirty_roots.clear()
        self.borrowed.clear()
        self.grown.clear()
        self.released_since.clear()
        self.admitted_low.clear()
