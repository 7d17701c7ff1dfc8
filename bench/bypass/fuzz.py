"""The bypass fuzzer's loop: per kind, build a world, generate its mutations, try them (all, or
a seeded sample spread over categories and roles), rebuild the world when an attempt changed
it, and count the outcomes.
"""

from __future__ import annotations

import random
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field

from kubernetes.client.exceptions import ApiException

from bench.bypass.attempt import Outcome, Timing, attempt
from bench.bypass.claims import charge_mutations, owner_mutations, resize_mutations
from bench.bypass.claims import scale_mutation as scale_of
from bench.bypass.kinds import KindCase
from bench.bypass.mutations import Mutation, object_mutations
from bench.bypass.world import Pool, UserRest, World, create_world, delete_world
from bench.chaos.world import Rest
from queuectl.testenv.invariants import Sampler

RESULTS = ("refused", "evicted", "transient", "harmless", "violation")
"""`transient`: pods ran beyond the admission for a moment and were gone again within the
eviction wait without an eviction (an owner's controller deleting a pod it does not want, the
enforcement loop deleting a pod group's excess pods, an operator's old pods terminating while
it remakes them); `violation`: the excess was still there when the wait ran out."""


@dataclass(frozen=True)
class Size:
    sample: int | None = None  # mutations per kind; None: every one generated
    budget_s: float = 600.0  # per kind, attempts only (world builds included)
    world_timeout_s: float = 120.0
    timing: Timing = field(default_factory=Timing)
    seed: int = 23


FULL = Size()
CI = Size(sample=5, budget_s=30.0, world_timeout_s=90.0, timing=Timing(1.5, 1.0, 6.0, 8.0))


@dataclass
class KindReport:
    kind: str
    generated: int = 0
    outcomes: list[Outcome] = field(default_factory=list)
    worlds: int = 0
    error: str = ""

    def count(self, result: str) -> int:
        return sum(1 for o in self.outcomes if o.result == result)

    @property
    def violations(self) -> list[Outcome]:
        return [o for o in self.outcomes if o.result == "violation"]


def _has_scale(rest: Rest, path: str) -> int | None:
    """The replicas of the object's scale subresource, None when its kind has none."""
    try:
        found = rest.call("GET", f"{path}/scale")
    except ApiException:
        return None
    replicas = (found.get("spec") or {}).get("replicas")
    return int(replicas) if isinstance(replicas, int) else 0


def generate(rest: Rest, world: World) -> list[Mutation]:
    """Every mutation for this world's roles, once each, in a stable order."""
    out: list[Mutation] = []
    for role, obj in sorted(world.roles.items()):
        out += object_mutations(role, obj)
        if role in ("pod", "gated-pod"):
            out += resize_mutations(role, obj)
        if role == "object" or role.startswith("child:"):
            out += owner_mutations(role, obj.get("kind", role))
        replicas = _has_scale(rest, world.paths[role])
        if replicas is not None:
            out.append(scale_of(role, replicas))
    out += charge_mutations()
    return list({m.ident: m for m in out}.values())


def spread(mutations: list[Mutation], n: int | None, seed: int) -> list[Mutation]:
    """A seeded order that takes one from each (category, role) bucket in turn, so a bounded
    run still touches every category and role; the first `n` of it (all when None)."""
    rng = random.Random(seed)
    buckets: dict[tuple[str, str], list[Mutation]] = defaultdict(list)
    for m in mutations:
        buckets[(m.category, m.role)].append(m)
    for b in buckets.values():
        rng.shuffle(b)
    keys = sorted(buckets)
    rng.shuffle(keys)
    order: list[Mutation] = []
    while any(buckets.values()):
        for k in keys:
            if buckets[k]:
                order.append(buckets[k].pop())
    return order if n is None else order[:n]


def fuzz_kind(
    rest: Rest,
    user: UserRest,
    pool: Pool,
    case: KindCase,
    sampler: Sampler,
    size: Size,
    progress: Callable[[str], None] = print,
) -> KindReport:
    report = KindReport(case.name)
    deadline = time.monotonic() + size.budget_s
    try:
        world = create_world(rest, pool, case, size.world_timeout_s)
    except (RuntimeError, ApiException) as err:
        report.error = f"world not built: {err}"
        return report
    report.worlds = 1
    sampler.watch([world.namespace])
    mutations = generate(rest, world)
    report.generated = len(mutations)
    chosen = spread(mutations, size.sample, size.seed + sum(map(ord, case.name)))
    progress(f"{case.name}: {len(mutations)} mutations generated, trying {len(chosen)}")
    current: World | None = world
    try:
        for m in chosen:
            if time.monotonic() > deadline:
                report.error = f"budget of {size.budget_s:.0f}s spent"
                break
            if current is None:
                current = create_world(rest, pool, case, size.world_timeout_s)
                sampler.watch([current.namespace])
                report.worlds += 1
            if m.role not in current.paths:
                continue
            outcome = attempt(rest, user, pool, current, sampler, m, size.timing)
            report.outcomes.append(outcome)
            if outcome.result != "refused":
                progress(f"  {outcome.result:<9} {m.ident}  {outcome.detail[:160]}")
            if outcome.rebuild:  # built again only if another attempt needs it
                delete_world(rest, current)
                current = None
    except (RuntimeError, ApiException) as err:
        report.error = f"stopped: {err}"
    finally:
        if current is not None:
            delete_world(rest, current)
    return report
