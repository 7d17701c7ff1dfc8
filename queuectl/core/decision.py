"""What evaluating one pending workload answers: admit it, preempt for it, or why not.

Its own module because both `assign` (which builds most answers) and `preempt` (which builds the
victim-search answers) produce it, and the cycle, parking and outcomes read it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from queuectl.core.charges import Charge
from queuectl.core.results import PendingInfo
from queuectl.core.types import Admission, FlavorResource


@dataclass(slots=True)
class Decision:
    kind: Literal["fit", "preempt", "fail"]
    admission: Admission | None = None
    victims: list[tuple[Charge, str]] = field(default_factory=list)
    need: dict[FlavorResource, int] = field(default_factory=dict)
    """What the whole workload needs, per (flavor, resource), for a preemption; for a failed
    victim search that could reclaim within its own quota (`reclaim_within`) too."""
    info: PendingInfo | None = None
    retry_at: float | None = None
    """A protected victim comes of age then: preemption may succeed without any event."""
    topology: bool = False
    borrows: bool = False
    """Admitting it takes quota beyond its queue's own: it waits for the second pass (a failed
    victim search too: queues that start borrowing there may be its victims)."""
    shorts: list[tuple[FlavorResource, int]] = field(default_factory=list)
    """For a failure: (flavor, resource) and how much more of it some flavor would need; the
    workload cannot fit until at least that much is freed in its cohort tree."""
    hopeless: bool = False
    """For a failure: no victim was even a candidate (or no preemption applies), so more free
    quota that still falls short cannot change the answer."""
    depends: list[FlavorResource] = field(default_factory=list)
    """For a failure: (flavor, resource)s chosen for a part while another flavor was possible.
    Less of one of them (someone else's admission) may send that part to another flavor and
    change the answer, so that wakes it too."""
    reclaim_within: bool = False
    """For a failed victim search while it would borrow: within its own quota it could reclaim
    from borrowers, so its own queue freeing quota may change the answer."""
    cross: bool = False
    """For a failed victim search: it looked at other queues' borrowed work (new borrowing in
    the tree may give it candidates)."""
    needs_room: bool = False
    """For a preemption: the answer read the nodes' free room (a flavor failed on placement, or
    the nodes as they are do not hold it, so its victims were chosen to free room too). Without
    it, room freed on the nodes cannot change the answer (`preempt.room_needed`)."""
