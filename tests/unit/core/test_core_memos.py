"""Remembered answers give the answers computed from scratch: `quota.available` (remembered per
node, built on the parent's answer)."""

from __future__ import annotations

from core_worlds import FAST
from hypothesis import given
from hypothesis import strategies as hs

from queuectl.core.quota import QNode, _down, add_usage, available, compute_subtree

FRS = [("h100", "gpu"), ("a100", "gpu")]


@hs.composite
def trees_and_changes(draw: hs.DrawFn) -> tuple[list[QNode], list[tuple[int, int, int]]]:
    """A random tree (root, cohorts, queues as leaves; nominal quotas, borrowing and lending
    limits) and a stream of (leaf, fr, delta) usage changes."""
    root = QNode("root", is_queue=False)
    nodes, leaves = [root], []
    for i in range(draw(hs.integers(1, 3))):
        cohort = QNode(f"c{i}", is_queue=False)
        cohort.parent = root
        root.children.append(cohort)
        nodes.append(cohort)
        for j in range(draw(hs.integers(1, 3))):
            leaf = QNode(f"c{i}q{j}", is_queue=True)
            leaf.parent = cohort
            cohort.children.append(leaf)
            nodes.append(leaf)
            leaves.append(leaf)
    for n in nodes:
        for fr in FRS:
            n.nominal[fr] = draw(hs.sampled_from([0, 0, 2, 4, 8]))
            if n.parent is not None and draw(hs.booleans()):
                n.borrowing_limit[fr] = draw(hs.integers(0, 6))
            if n.parent is not None and draw(hs.booleans()):
                n.lending_limit[fr] = draw(hs.integers(0, 6))
    compute_subtree(root)
    changes = draw(
        hs.lists(
            hs.tuples(
                hs.integers(0, len(leaves) - 1), hs.integers(0, len(FRS) - 1), hs.integers(1, 5)
            ),
            max_size=30,
        )
    )
    return nodes, changes


@FAST
@given(trees_and_changes(), hs.randoms(use_true_random=False))
def test_remembered_availability_equals_a_walk_from_the_root(
    tree: tuple[list[QNode], list[tuple[int, int, int]]], rnd: object
) -> None:
    nodes, changes = tree
    leaves = [n for n in nodes if n.is_queue]  # in the order `changes` counts them

    def check() -> None:
        order = list(nodes)
        rnd.shuffle(order)  # type: ignore[attr-defined]  # children before parents, or after
        for n in order:
            for fr in FRS:
                assert available(n, fr) == _down(list(n.chain), fr, None), (n.name, fr)

    check()
    held: dict[tuple[int, int], int] = {}
    for li, fi, delta in changes:
        # Give back what is held half of the time, so usage both grows and shrinks.
        back = held.get((li, fi), 0)
        d = -min(back, delta) if back and delta % 2 == 0 else delta
        add_usage(leaves[li], FRS[fi], d)
        held[(li, fi)] = back + d
        check()
