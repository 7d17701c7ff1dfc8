"""Pod-set slices and balanced placement.

A gang bigger than one domain can still ask for structure: slices of N pods, each slice in ONE
domain of a level (8 pods per NVLink domain), up to three levels nested outermost first (64 pods
in one block, slices of 16 per rack, slices of 4 per NVLink domain), the whole pod set in one
domain of a coarser `required` level or anywhere. A domain holds whole slices only: an innermost
domain holds floor(its free pods / size) slices, an outer one floor(the inner slices of its inner
domains / (outer size / inner size)). Counting that way is exact (slices are independent), so a
domain chosen by its count always has room for what it is given.

Slices are shared out over domains best fit (the smallest domain that holds the rest, else the
largest filled), or, when the pod set asks for balance, evenly: the fewest domains that hold them
(the largest), then water-filled so that two chosen domains differ by at most one slice unless
the smaller is full; then the note says which domain held less than its share. Inside an
innermost domain the pods are packed as without slices (`slots.distribute`). Balance without
slices is the same with slices of one pod at the level just below the chosen domain.

The domains come out in pod order (slice by slice), so the controller can tell which pods form
each slice: the pods [j*size, (j+1)*size) of the listed counts are slice j of that level.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from queuectl.core.slots import Slot, distribute
from queuectl.core.types import DomainAssignment, Node, TopologyAssignment, TopologyRequest

MAX_SLICE_LEVELS = 3

Chain = tuple[tuple[int, int], ...]
"""(level index, slice size) outermost first; an index past the last level means one node."""


@dataclass(slots=True)
class SliceDomain:
    key: tuple[str, ...]
    """Label values down to its level (then the node name past the last level)."""
    slots: list[Slot]
    """Its nodes with room (read only at the innermost slice level, through `members`)."""
    holds: int
    """Slices of its level it holds."""
    inner: list[SliceDomain] = field(default_factory=list)
    """Its domains of the next slice level."""
    fill: Callable[[], list[Slot]] | None = None
    """Builds `slots` when asked instead (an index lists only the domains it gives pods)."""

    def members(self) -> list[Slot]:
        return self.slots if self.fill is None else self.fill()


class SliceView(Protocol):
    """The nodes as sliced placement reads them (`topology.NodeView`)."""

    def total(self, count: int) -> int:
        """Pods of a gang of `count` that all nodes hold."""
        ...

    def slice_domains(self, chain: Chain, count: int) -> list[SliceDomain]:
        """The domains of slice level 0 of `chain` with room, each with what it holds and its
        inner domains, sorted by key at every level (`domains_of`)."""
        ...


@dataclass(slots=True)
class _Out:
    picks: list[tuple[Slot, int]] = field(default_factory=list)
    note: str | None = None


def slice_problem(request: TopologyRequest, levels: Sequence[str], count: int) -> str | None:
    """What is wrong with a pod set's slices for this Topology (None: nothing)."""
    slices = request.slices
    if not slices:
        return None  # no slices asked: nothing of them can be wrong
    if len(slices) > MAX_SLICE_LEVELS:
        return (
            f"{len(slices)} slice levels asked, at most {MAX_SLICE_LEVELS} are supported; "
            "drop the middle ones"
        )
    for lv, size in slices:
        if lv not in levels:
            return f"slice level {lv!r} is not one of {list(levels)}"
        if size < 1:
            return f"slice size {size} for {lv} must be at least 1"
    idx = [levels.index(lv) for lv, _ in slices]
    for (a, sa), (b, sb), ia, ib in zip(slices, slices[1:], idx, idx[1:], strict=False):
        if ia >= ib:
            return (
                f"slice levels go outermost first as the Topology lists them ({list(levels)}): "
                f"{b} is not inside {a}"
            )
        if sa % sb:
            return (
                f"slices of {sb} per {b} do not divide the slices of {sa} per {a}; "
                "make each inner size divide the outer one"
            )
    outer = request.required or request.preferred
    if outer is not None and outer in levels and levels.index(outer) > idx[0]:
        return (
            f"the pod set's level {outer} is finer than its outermost slice level {slices[0][0]}; "
            "ask for a level that contains the slices"
        )
    if count % slices[0][1]:
        return (
            f"{count} pods do not make whole slices of {slices[0][1]}; "
            "make the pod count a multiple of the outermost slice size"
        )
    return None


def _key(node: Node, levels: Sequence[str], idx: int) -> tuple[str, ...]:
    values = tuple(node.labels.get(lv, "") for lv in levels[: idx + 1])
    return values if idx < len(levels) else (*values, node.name)


def _domains(
    slots: Sequence[Slot], levels: Sequence[str], chain: Chain, k: int
) -> list[SliceDomain]:
    """The domains of slice level `k` among `slots`, each with what it holds, sorted by key."""
    idx, size = chain[k]
    groups: dict[tuple[str, ...], list[Slot]] = {}
    for s in slots:
        groups.setdefault(_key(s.node, levels, idx), []).append(s)
    out = []
    for key in sorted(groups):
        members = groups[key]
        if k + 1 < len(chain):
            inner = _domains(members, levels, chain, k + 1)
            holds = sum(d.holds for d in inner) // (size // chain[k + 1][1])
            out.append(SliceDomain(key, members, holds, inner))
        else:
            out.append(SliceDomain(key, members, sum(s.cap for s in members) // size))
    return out


def even(caps: Sequence[int], units: int) -> list[int]:
    """`units` (at most sum(caps)) shared as evenly as `caps` allow: raise a common level,
    each domain capped by what it holds, the last units one each to the first uncapped."""
    lo, hi = 0, max(caps, default=0)
    while lo < hi:  # the lowest level t with sum(min(cap, t)) >= units
        mid = (lo + hi) // 2
        if sum(min(c, mid) for c in caps) >= units:
            hi = mid
        else:
            lo = mid + 1
    share = [min(c, lo - 1) if lo else 0 for c in caps]
    rest = units - sum(share)
    for i, c in enumerate(caps):
        if rest and c >= lo > share[i]:
            share[i] += 1
            rest -= 1
    return share


def _share(
    domains: list[SliceDomain], units: int, balanced: bool, what: str, out: _Out
) -> list[tuple[SliceDomain, int]]:
    """`units` over `domains` (they hold enough): best fit, or evenly; in key order."""
    if balanced:
        ranked = sorted(domains, key=lambda d: (-d.holds, d.key))
        chosen: list[SliceDomain] = []
        for d in ranked:
            if sum(c.holds for c in chosen) >= units:
                break
            chosen.append(d)
        chosen.sort(key=lambda d: d.key)
        got = even([d.holds for d in chosen], units)
        if out.note is None and got and max(got) - min(got) > 1:
            low = got.index(min(got))
            out.note = (
                f"balanced placement is uneven: {what} {'/'.join(map(str, got))} over "
                f"{len(got)} domains, as {chosen[low].key[-1]} holds only {got[low]}"
            )
        return [(d, n) for d, n in zip(chosen, got, strict=True) if n > 0]
    picked: list[tuple[SliceDomain, int]] = []
    left = list(domains)
    remaining = units
    while remaining > 0 and left:
        fitting = [d for d in left if d.holds >= remaining]
        if fitting:
            pick = min(fitting, key=lambda d: (d.holds, d.key))
        else:
            pick = max(left, key=lambda d: (d.holds, tuple(-ord(c) for c in "/".join(d.key))))
        take = min(remaining, pick.holds)
        left.remove(pick)
        picked.append((pick, take))
        remaining -= take
    return sorted(picked, key=lambda p: p[0].key)


def _emit(
    d: SliceDomain, n: int, k: int, levels: Sequence[str], chain: Chain, balanced: bool, out: _Out
) -> None:
    """Place `n` slices of level `k` inside `d`, appending the nodes in pod order."""
    idx, size = chain[k]
    if k + 1 < len(chain):
        inner = chain[k + 1]
        what = f"slices of {inner[1]} pods per {_name(levels, inner[0])}"
        for child, m in _share(d.inner, n * (size // inner[1]), balanced, what, out):
            _emit(child, m, k + 1, levels, chain, balanced, out)
        return
    picks = distribute(d.members(), n * size, levels, idx + 1)
    out.picks.extend(sorted((p for p in picks if p[1] > 0), key=lambda p: p[0].node.name))


def _name(levels: Sequence[str], idx: int) -> str:
    return levels[idx] if idx < len(levels) else "node"


def spread(
    slots: Sequence[Slot],
    levels: Sequence[str],
    chain: Chain,
    units: int,
    balanced: bool,
    where: tuple[str | None, tuple[str, ...]],
    slices: tuple[tuple[str, int], ...] = (),
) -> TopologyAssignment | None:
    """`units` slices of `chain[0]` over `slots` (one chosen domain, or all nodes); None when
    they do not hold them. `where` is the chosen domain's (level, values)."""
    return _spread(_domains(slots, levels, chain, 0), levels, chain, units, balanced, where, slices)


def _spread(
    domains: list[SliceDomain],
    levels: Sequence[str],
    chain: Chain,
    units: int,
    balanced: bool,
    where: tuple[str | None, tuple[str, ...]],
    slices: tuple[tuple[str, int], ...],
) -> TopologyAssignment | None:
    if sum(d.holds for d in domains) < units:
        return None
    out = _Out()
    what = f"slices of {chain[0][1]} pods per {_name(levels, chain[0][0])}"
    for d, n in _share(domains, units, balanced, what, out):
        _emit(d, n, 0, levels, chain, balanced, out)
    return TopologyAssignment(
        levels=tuple(levels),
        level=where[0],
        domain=where[1],
        domains=tuple(
            DomainAssignment(
                values=tuple(s.node.labels.get(lv, "") for lv in levels),
                nodes=(s.node.name,),
                count=c,
            )
            for s, c in out.picks
        ),
        slices=slices,
        note=out.note,
    )


def domains_of(slots: Sequence[Slot], levels: Sequence[str], chain: Chain) -> list[SliceDomain]:
    """The domains of slice level 0 among the slots whose nodes have every label down to the
    innermost slice level (the plain walk's `SliceView.slice_domains`)."""
    deepest = chain[-1][0]
    usable = [s for s in slots if all(lv in s.node.labels for lv in levels[: deepest + 1])]
    return _domains(usable, levels, chain, 0)


def place_sliced(
    view: SliceView, levels: Sequence[str], request: TopologyRequest, count: int
) -> TopologyAssignment | str:
    """Place a pod set that asks for slices: in one domain of its required level (best fit by
    slices held), its preferred level or a coarser one, else anywhere."""
    problem = slice_problem(request, levels, count)
    if problem is not None:
        return problem
    chain = tuple((levels.index(lv), size) for lv, size in request.slices)
    units = count // chain[0][1]
    domains = view.slice_domains(chain, count)
    balanced, outer = request.balanced, request.required or request.preferred
    if outer is not None:
        if outer not in levels:
            return f"topology level {outer!r} is not one of {list(levels)}"
        top = levels.index(outer)
        lowest = top if request.required else 0
        for i in range(top, lowest - 1, -1):
            found = _best_domain(domains, units, i)
            if found is not None:
                key, members = found
                where = (levels[i], key)
                placed = _spread(members, levels, chain, units, balanced, where, request.slices)
                assert placed is not None  # the domain was chosen for what it holds
                return placed
        if request.required:
            return _unplaced(domains, view.total(count), levels, chain, count, top)
    placed = _spread(domains, levels, chain, units, balanced, (None, ()), request.slices)
    if placed is not None:
        return placed
    return _unplaced(domains, view.total(count), levels, chain, count, None)


def _best_domain(
    domains: list[SliceDomain], units: int, idx: int
) -> tuple[tuple[str, ...], list[SliceDomain]] | None:
    """The domain of level `idx` that holds `units` outer slices with the fewest to spare."""
    by_domain = _holds_by(domains, idx)
    best: tuple[int, tuple[str, ...]] | None = None
    for key, (holds, _) in by_domain.items():
        if holds >= units and (best is None or (holds, key) < best):
            best = (holds, key)
    return None if best is None else (best[1], by_domain[best[1]][1])


def _holds_by(
    domains: list[SliceDomain], idx: int
) -> dict[tuple[str, ...], tuple[int, list[SliceDomain]]]:
    """Per domain of level `idx` (containing the outer slice level): the outer slices it holds,
    and its domains of the outer slice level."""
    holds: dict[tuple[str, ...], int] = {}
    members: dict[tuple[str, ...], list[SliceDomain]] = {}
    for d in domains:
        key = d.key[: idx + 1]
        holds[key] = holds.get(key, 0) + d.holds
        members.setdefault(key, []).append(d)
    return {key: (h, members[key]) for key, h in holds.items()}


def _plural(n: int, size: int) -> str:
    return f"{n} slice{'s' if n != 1 else ''} of {size} pod{'s' if size != 1 else ''}"


def _unplaced(
    domains: list[SliceDomain],
    total: int,
    levels: Sequence[str],
    chain: Chain,
    count: int,
    top: int | None,
) -> str:
    """Why no placement exists, level by level: what the largest domain of each holds."""
    size0 = chain[0][1]
    units = count // size0
    shape = " in " + ", ".join(f"slices of {s} per {levels[i]}" for i, s in chain)
    if top is not None:
        largest = max((h for h, _ in _holds_by(domains, top).values()), default=0)
        head = (
            f"no {levels[top]} domain holds {count} pods{shape}; "
            f"the largest {levels[top]} holds {_plural(largest, size0)}"
        )
    else:
        held = sum(d.holds for d in domains)
        head = f"the nodes hold {_plural(held, size0)}, not {units}{shape}"
    parts = [head]
    layer = domains
    for k, (idx, size) in enumerate(chain):
        most = max((d.holds for d in layer), default=0)
        parts.append(f"the largest {levels[idx]} holds {_plural(most, size)}")
        if k + 1 < len(chain):
            layer = [c for d in layer for c in d.inner]
    parts.append(f"{total} pods fit over all nodes")
    return "; ".join(parts)
