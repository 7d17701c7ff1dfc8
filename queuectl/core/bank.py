"""GPU time banking: credit for guaranteed GPUs left idle, spent while borrowing.

A ClusterQueue with a `GpuTimeBank` earns `accrual_rate` GPU-hours of credit per hour for each
GPU of its nominal quota it leaves unused, pays one GPU-hour per hour for each GPU it borrows,
and its credit decays with `half_life_hours`; the balance stays within [0, cap]. Credit decides
two things, and only among borrowers (nominal quota is never affected), both through
`has_credit`: in the cycle's borrowing pass queues with credit go before queues without (then
fair share), and reclaim takes from queues without credit before queues with (then fair share).
docs/design/banking.md says why.

The balance is pure bookkeeping over time: `accrue` is a function of the balance, the queue's
GPU flows (idle nominal, borrowed) and the seconds they lasted. `Ledger.settle(now)` runs at the
start of every cycle: the flows observed when the previous cycle ended held until `now` (usage
only changes at events, and every event is followed by a cycle), so the simulator's virtual
clock and the controller's wall clock keep the same books.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

from queuectl.core.quota import QNode
from queuectl.core.types import GPU, ClusterQueue, GpuTimeBank

HOUR = 3600.0


def accrue(
    balance: float, bank: GpuTimeBank, idle_gpus: int, borrowed_gpus: int, seconds: float
) -> float:
    """The balance after `seconds` in which the queue left `idle_gpus` of its nominal GPUs
    unused and borrowed `borrowed_gpus`, starting from `balance` (clamped into [0, cap] first).

    d(balance)/dt = (rate * idle - borrowed) / hour - ln 2 / half-life * balance, kept within
    [0, cap]: the solution moves monotonically towards its fixed point, so clamping the closed
    form at the end equals clamping at every instant, and two intervals give what one does.
    """
    cap = max(0.0, bank.cap_gpu_hours)
    b = min(cap, max(0.0, balance))
    if seconds <= 0.0:
        return b
    net = (bank.accrual_rate * idle_gpus - borrowed_gpus) / HOUR  # GPU-hours per second
    half = bank.half_life_hours
    if half is None or half <= 0.0:
        b += net * seconds
    else:
        decay = math.log(2.0) / (half * HOUR)
        fixed = net / decay
        b = fixed + (b - fixed) * math.exp(-decay * seconds)
    return min(cap, max(0.0, b))


def gpu_flows(node: QNode) -> tuple[int, int]:
    """(GPUs of its nominal quota the queue leaves unused, GPUs it borrows), over flavors."""
    idle = borrowed = 0
    for fr, nominal in node.nominal.items():
        if fr[1] == GPU:
            idle += max(0, nominal - node.usage.get(fr, 0))
    for fr in node.usage:
        if fr[1] == GPU:
            borrowed += node.borrowed(fr)
    return idle, borrowed


@dataclass(slots=True)
class Ledger:
    """Balances of the banked queues, and the flows that hold until the next settle."""

    banks: dict[str, GpuTimeBank] = field(default_factory=dict)
    balances: dict[str, float] = field(default_factory=dict)
    flows: dict[str, tuple[int, int]] = field(default_factory=dict)
    """queue -> (idle, borrowed) GPUs as observed at `at`."""
    at: float | None = None
    """When the balances were last brought up to date (None: never)."""

    def configure(self, queues: Mapping[str, ClusterQueue]) -> None:
        """Specs changed: a queue whose bank is gone forgets its balance."""
        self.banks = {n: q.gpu_time_bank for n, q in queues.items() if q.gpu_time_bank}
        for book in (self.balances, self.flows):
            for name in [n for n in book if n not in self.banks]:
                del book[name]

    def restore(self, name: str, balance: float) -> None:
        """A balance read back from the queue's status (a controller restart): it counts from
        the next settle on; the time no controller watched earns and costs nothing."""
        self.balances[name] = max(0.0, balance)

    def settle(self, now: float, queues: Mapping[str, QNode]) -> set[str]:
        """Bring every balance up to `now`, then observe the flows that hold from `now` on.
        Returns the queues whose `has_credit` answer changed (parked work may read it)."""
        if not self.banks:
            self.at = now
            return set()
        before = {name for name in self.banks if self.has_credit(name)}
        if self.at is not None and now > self.at:
            seconds = now - self.at
            for name, bank in self.banks.items():
                idle, borrowed = self.flows.get(name, (0, 0))
                self.balances[name] = accrue(
                    self.balances.get(name, 0.0), bank, idle, borrowed, seconds
                )
        if self.at is None or now > self.at:
            self.at = now
        self.observe(queues)
        return before ^ {name for name in self.banks if self.has_credit(name)}

    def observe(self, queues: Mapping[str, QNode]) -> None:
        """Record the flows as usage stands now (a cycle's admissions changed it)."""
        for name in self.banks:
            node = queues.get(name)
            self.flows[name] = gpu_flows(node) if node is not None else (0, 0)

    def balance(self, name: str, now: float) -> float | None:
        """The queue's balance as it will be at `now` if nothing changes (None: no bank)."""
        bank = self.banks.get(name)
        if bank is None:
            return None
        idle, borrowed = self.flows.get(name, (0, 0))
        since = now - self.at if self.at is not None else 0.0
        return accrue(self.balances.get(name, 0.0), bank, idle, borrowed, since)

    def turns(self, name: str) -> float | None:
        """When `has_credit` changes for the queue if its flows hold (None: never, or no bank).
        A second late either way, so that the balance settled then surely has its new sign (a
        cycle woken for it never sees a sliver left by rounding): credit that runs out reaches
        zero by the closed form of `accrue`; a queue at zero that now earns more than it spends
        has credit as soon as any time passes."""
        bank, balance = self.banks.get(name), self.balances.get(name, 0.0)
        if bank is None or self.at is None:
            return None
        idle, borrowed = self.flows.get(name, (0, 0))
        net = (bank.accrual_rate * idle - borrowed) / HOUR
        if balance <= 0.0:
            return self.at + 1.0 if net > 0.0 else None
        half = bank.half_life_hours
        if half is None or half <= 0.0:
            return self.at + balance / -net + 1.0 if net < 0.0 else None
        decay = math.log(2.0) / (half * HOUR)
        fixed = net / decay
        if fixed >= 0.0:
            return None  # it decays towards a non-negative balance, reached only in the limit
        # fixed + (balance - fixed) * exp(-decay * t) = 0
        return self.at + math.log((balance - fixed) / -fixed) / decay + 1.0

    def has_credit(self, name: str) -> bool:
        """The one rule that credit changes decisions by (see the module docstring)."""
        return self.balances.get(name, 0.0) > 0.0
