"""Issue 5 e2e: scraping the controller's /metrics after a small run gives the expected values.

Two 8-GPU Jobs are admitted into a 16-GPU ClusterQueue, one finishes, and a 16-GPU gang waits
beyond quota. The scenario brings two kwok nodes of its own (a product and pool label no other
test's flavor matches) so capacity and allocation of its flavor are exact.
"""

from __future__ import annotations

import time

from prometheus_client.parser import text_string_to_metric_families

from e2e.harness import (
    ControllerProcess,
    admitted,
    apply,
    cluster_queue,
    gpu_job,
    is_true,
    local_queue,
    priority_class,
    wait_for,
    workload_of,
)
from queuectl.api import names
from queuectl.testenv.cluster import Cluster

PRODUCT = "NVIDIA-L4-metrics"
POOL = "e2e.queuectl.io/pool"

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def scrape(controller: ControllerProcess) -> Samples:
    out: Samples = {}
    for family in text_string_to_metric_families(controller.metrics()):
        for s in family.samples:
            out[(s.name, frozenset(s.labels.items()))] = s.value
    return out


def sample(samples: Samples, name: str, **labels: str) -> float | None:
    return samples.get((name, frozenset(labels.items())))


def test_metrics_after_two_jobs_ran_and_a_gang_waits_beyond_quota(
    control_plane: Cluster, namespace: str, controller: ControllerProcess
) -> None:
    prefix = f"metrics{int(time.time()) % 100000}"
    control_plane.add_gpu_nodes(
        2, product=PRODUCT, memory_mib=23034, name_prefix=prefix, labels={POOL: prefix}
    )
    cq, pc = f"cq-{namespace}", f"pc-{namespace}"
    flavor = {
        "apiVersion": names.API_VERSION,
        "kind": "ResourceFlavor",
        "metadata": {"name": prefix},
        "spec": {"nodeLabels": {names.LABEL_GPU_PRODUCT: PRODUCT, POOL: prefix}},
    }
    apply(
        control_plane,
        flavor,
        priority_class(pc, 10),
        cluster_queue(cq, namespace, {prefix: 16}),
        local_queue("lq", namespace, cq),
    )
    apply(
        control_plane,
        gpu_job("short", namespace, "lq", gpus=8, priority=pc, runs_for="3s"),
        gpu_job("long", namespace, "lq", gpus=8, priority=pc),
    )
    wait_for(
        "both admitted",
        lambda: (
            admitted(control_plane, namespace, "short")
            and admitted(control_plane, namespace, "long")
        ),
    )
    apply(control_plane, gpu_job("gang", namespace, "lq", pods=2, gpus=8, priority=pc))
    wait_for(
        "short finished",
        lambda: is_true(workload_of(control_plane, namespace, "short"), names.COND_FINISHED),
    )

    gpu = names.GPU_RESOURCE
    expected = {
        ("queuectl_pending_workloads", (("cluster_queue", cq), ("priority_class", pc))): 1,
        ("queuectl_admitted_active_workloads", (("cluster_queue", cq),)): 1,
        ("queuectl_admitted_workloads_total", (("cluster_queue", cq),)): 2,
        ("queuectl_finished_workloads_total", (("cluster_queue", cq), ("reason", "Succeeded"))): 1,
        ("queuectl_admission_wait_time_seconds_count", (("cluster_queue", cq),)): 2,
        (
            "queuectl_cluster_queue_quota",
            (("cluster_queue", cq), ("flavor", prefix), ("resource", gpu), ("kind", "nominal")),
        ): 16,
        (
            "queuectl_cluster_queue_quota",
            (("cluster_queue", cq), ("flavor", prefix), ("resource", gpu), ("kind", "used")),
        ): 8,
        ("queuectl_flavor_gpus", (("flavor", prefix), ("kind", "capacity"))): 16,
        ("queuectl_flavor_gpus", (("flavor", prefix), ("kind", "allocated"))): 8,
        ("queuectl_gpu_allocation_ratio", (("flavor", prefix),)): 0.5,
    }

    def settled() -> Samples | None:
        """The scrape once every expected figure reads as expected (the queue gauges are
        refreshed once a second)."""
        samples = scrape(controller)
        for (name, labels), want in expected.items():
            if sample(samples, name, **dict(labels)) != want:
                return None
        return samples

    try:
        samples = wait_for("the expected figures", settled, timeout=30)
    except AssertionError:
        samples = scrape(controller)
        got = {key: sample(samples, key[0], **dict(key[1])) for key in expected}
        raise AssertionError(f"figures never settled: {got}") from None

    # The short job held 8 GPUs for at least its 3 s of runtime (the long one still runs).
    charged = sample(
        samples, "queuectl_gpu_seconds_total", namespace=namespace, cluster_queue=cq, flavor=prefix
    )
    assert charged is not None and charged >= 8 * 3
    failed = sample(samples, "queuectl_finished_workloads_total", cluster_queue=cq, reason="Failed")
    assert failed in (None, 0)
    fragmentation = sample(samples, "queuectl_gpu_fragmentation_ratio")
    assert fragmentation is not None and 0.0 <= fragmentation <= 1.0
    cycles = sample(samples, "queuectl_scheduling_cycle_duration_seconds_count")
    assert cycles is not None and cycles > 0
    per_cycle = sample(samples, "queuectl_admissions_per_cycle_sum")
    assert per_cycle is not None and per_cycle >= 2  # the two admissions, at least

    # The counter keeps growing while the long job runs, with no cycle needed to move it.
    def grown() -> bool:
        now = sample(
            scrape(controller),
            "queuectl_gpu_seconds_total",
            namespace=namespace,
            cluster_queue=cq,
            flavor=prefix,
        )
        return now is not None and now > charged

    wait_for("gpu-seconds to grow", grown, timeout=10)
