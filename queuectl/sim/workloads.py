"""A trace job -> the core's Workload, as the controller would build it from the Job.

The LocalQueue resolves to its ClusterQueue, the priority class gives the priority, the grace
period and the minimum runtime (as `Feed._to_core` does), and quantities are read by
`queuectl.convert.canonical`, the controller's own parser.
"""

from __future__ import annotations

from queuectl import convert
from queuectl.core import GPU, PodSet, TopologyRequest, Workload
from queuectl.core.slices import slice_problem
from queuectl.sim.config import SimConfig, SimInputError
from queuectl.sim.trace import Job


def level_of(config: SimConfig, value: str, job: Job) -> str | None:
    """A topology level named by its node label or by its last part (`rack`)."""
    if not value:
        return None
    for topo in config.topologies:
        for level in topo.levels:
            if value in (level, level.rsplit("/", 1)[-1]):
                return level
    raise SimInputError(f"job {job.key}: no Topology has a level {value!r}")


def _check_slices(config: SimConfig, job: Job, topo: TopologyRequest) -> None:
    """Slices the replay could never place (sizes that do not divide, levels out of the
    Topology's order, pods not in whole slices) are the trace's error, not a job that waits."""
    if not topo.slices:
        return
    wanted = [lv for lv, _ in topo.slices]
    for t in config.topologies:
        if all(lv in t.levels for lv in wanted):
            problem = slice_problem(topo, t.levels, job.pods)
            if problem is not None:
                raise SimInputError(f"job {job.key}: {problem}")
            return


def build_workload(config: SimConfig, job: Job) -> tuple[str, Workload]:
    """(ClusterQueue, Workload) for a job; a clear error for a queue or class not defined."""
    cq = config.local_queues.get((job.namespace, job.queue))
    if cq is None:
        known = ", ".join(f"{ns}/{q}" for ns, q in sorted(config.local_queues))
        raise SimInputError(
            f"job {job.key}: no LocalQueue {job.namespace}/{job.queue} in the manifests "
            f"(known: {known})"
        )
    priority, grace, minimum = 0, 0.0, 0.0
    if job.priority_class:
        pc = config.priority_classes.get(job.priority_class)
        if pc is None:
            known = ", ".join(sorted(config.priority_classes)) or "none"
            raise SimInputError(
                f"job {job.key}: no WorkloadPriorityClass {job.priority_class!r} (known: {known})"
            )
        priority, grace, minimum = pc.value, pc.grace_seconds, pc.minimum_runtime_seconds
    requests = {GPU: job.gpus} if job.gpus else {}
    for res, value in (("cpu", job.cpu), ("memory", job.memory)):
        if value:
            try:
                requests[res] = convert.canonical(res, value)
            except ValueError as err:
                raise SimInputError(f"job {job.key}: {res} {value!r}: {err}") from None
    topo = None
    if job.topology_required or job.topology_preferred or job.topology_slices:
        topo = TopologyRequest(
            required=level_of(config, job.topology_required, job),
            preferred=level_of(config, job.topology_preferred, job),
            slices=tuple((level_of(config, lv, job) or lv, n) for lv, n in job.topology_slices),
            balanced=job.topology_balanced,
        )
        _check_slices(config, job, topo)
    elif job.topology_balanced:
        topo = TopologyRequest(balanced=True)
    return cq, Workload(
        key=job.key,
        cluster_queue=cq,
        podsets=(PodSet("main", job.pods, requests, topology=topo),),
        priority=priority,
        created=job.submit,
        preemption_grace_seconds=grace,
        minimum_runtime_seconds=minimum,
        max_execution_seconds=job.max_exec,
    )
