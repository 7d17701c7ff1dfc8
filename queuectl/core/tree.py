"""Build the quota tree from cohorts and queues, refusing bad input without crashing.

Bad input is confined to the objects it affects: a negative quota is counted as zero and reported;
a cohort in a parent cycle is reported and every queue under it is inactive (detached from the
tree so nothing it holds touches a neighbour); a queue naming an unknown flavor, or covering a
resource twice, is inactive. Cohorts that queues name but nobody created exist implicitly.
A queue whose admission checks are missing or not Active is inactive too (`checks.queue_issue`),
with that reason: its spec is fine, it waits for the checks.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from queuectl.core import reasons
from queuectl.core.checks import queue_issue
from queuectl.core.quota import QNode, compute_subtree
from queuectl.core.results import Problem
from queuectl.core.types import (
    AdmissionCheck,
    ClusterQueue,
    Cohort,
    Flavor,
    FlavorResource,
    ResourceGroup,
)


@dataclass(slots=True)
class Tree:
    queues: dict[str, QNode] = field(default_factory=dict)
    cohorts: dict[str, QNode] = field(default_factory=dict)
    inactive: dict[str, str] = field(default_factory=dict)
    """queue name -> why it admits nothing"""
    inactive_reason: dict[str, str] = field(default_factory=dict)
    """queue name -> the reason of `inactive` (InvalidSpec unless the queue waits for checks)"""
    problems: list[Problem] = field(default_factory=list)
    leaves: dict[QNode, list[QNode]] = field(default_factory=dict)
    """root node -> the queues under it, in name order"""
    covering: dict[str, dict[str, int]] = field(default_factory=dict)
    """queue name -> resource -> index of the resource group that covers it"""


def _load_quotas(
    node: QNode, groups: tuple[ResourceGroup, ...], kind: str, tree: Tree
) -> list[str]:
    """Copy quotas onto `node`; return what is wrong with them (negatives become zero)."""
    issues: list[str] = []
    for group in groups:
        for fq in group.flavors:
            for rq in fq.resources:
                fr: FlavorResource = (fq.name, rq.name)
                for what, value in (
                    ("nominalQuota", rq.nominal),
                    ("borrowingLimit", rq.borrowing_limit),
                    ("lendingLimit", rq.lending_limit),
                ):
                    if value is not None and value < 0:
                        issues.append(f"negative {what} {value} for {fq.name}/{rq.name}")
                node.nominal[fr] = node.nominal.get(fr, 0) + max(0, rq.nominal)
                if rq.borrowing_limit is not None:
                    node.borrowing_limit[fr] = max(0, rq.borrowing_limit)
                if rq.lending_limit is not None:
                    node.lending_limit[fr] = max(0, rq.lending_limit)
    for issue in issues:
        tree.problems.append(Problem(kind, node.name, reasons.INVALID_SPEC, issue))
    return issues


def _queue_issues(
    cq: ClusterQueue, flavors: Mapping[str, Flavor]
) -> tuple[list[str], dict[str, int]]:
    issues: list[str] = []
    covering: dict[str, int] = {}
    for i, group in enumerate(cq.resource_groups):
        for res in group.covered_resources:
            if res in covering:
                issues.append(f"resource {res} is covered by more than one resource group")
            covering[res] = i
        seen: set[str] = set()
        for fq in group.flavors:
            if fq.name in seen:
                issues.append(f"flavor {fq.name} is listed twice")
            seen.add(fq.name)
            if fq.name not in flavors:
                issues.append(f"flavor {fq.name} not found")
            for rq in fq.resources:
                if rq.name not in group.covered_resources:
                    issues.append(f"flavor {fq.name} sets quota for uncovered resource {rq.name}")
    return issues, covering


def _cyclic(cohorts: Mapping[str, Cohort]) -> set[str]:
    """Cohorts that are on, or hang below, a cycle of parent links."""
    bad: set[str] = set()
    for start in cohorts:
        seen: list[str] = []
        cur: str | None = start
        while cur is not None and cur in cohorts:
            if cur in seen or cur in bad:
                bad.update(seen)
                break
            seen.append(cur)
            cur = cohorts[cur].parent
    return bad


def build(
    cohorts: Mapping[str, Cohort],
    queues: Mapping[str, ClusterQueue],
    flavors: Mapping[str, Flavor],
    checks: Mapping[str, AdmissionCheck] | None = None,
) -> Tree:
    tree = Tree()
    bad = _cyclic(cohorts)
    for name in sorted(bad):
        tree.problems.append(
            Problem("Cohort", name, reasons.INVALID_SPEC, "cohort parents form a cycle")
        )

    def cohort_node(name: str) -> QNode | None:
        if name in bad:
            return None
        node = tree.cohorts.get(name)
        if node is not None:
            return node
        spec = cohorts.get(name)
        node = QNode(name, is_queue=False, weight=spec.fair_weight if spec else 1.0)
        tree.cohorts[name] = node
        if spec is not None:
            _load_quotas(node, spec.resource_groups, "Cohort", tree)
            if spec.parent is not None:
                parent = cohort_node(spec.parent)
                if parent is not None:
                    node.parent = parent
                    parent.children.append(node)
        return node

    for name in sorted(cohorts):
        cohort_node(name)
    for name in sorted(queues):
        cq = queues[name]
        node = QNode(name, is_queue=True, weight=cq.fair_weight)
        tree.queues[name] = node
        issues, covering = _queue_issues(cq, flavors)
        tree.covering[name] = covering
        issues += _load_quotas(node, cq.resource_groups, "ClusterQueue", tree)
        structural = [i for i in issues if not i.startswith("negative")]
        for issue in structural:
            tree.problems.append(Problem("ClusterQueue", name, reasons.INVALID_SPEC, issue))
        if cq.cohort is not None:
            parent = cohort_node(cq.cohort)
            if parent is None:
                issues.append(f"cohort {cq.cohort} is in a cycle of cohort parents")
            else:
                node.parent = parent
                parent.children.append(node)
        if issues:
            tree.inactive[name] = "; ".join(issues)
            tree.inactive_reason[name] = reasons.INVALID_SPEC
        elif cq.admission_checks and (gate := queue_issue(cq, checks or {})) is not None:
            tree.inactive_reason[name], tree.inactive[name] = gate
    for node in list(tree.cohorts.values()) + list(tree.queues.values()):
        if node.parent is None:
            compute_subtree(node)
    for node in tree.queues.values():
        tree.leaves.setdefault(node.root, []).append(node)
    return tree
