"""Fair shares taken back, on the real control plane: with `--fair-sharing-preemption` on, an
equal-priority team at share 0 takes borrowed GPUs back from the team that took them all.

The cohort owns one 8-GPU H100 node (tainted, so only this test's flavor reaches it); teams a
and b own nothing, so all they run is borrowed. b came first and runs two 4-GPU jobs.
"""

from __future__ import annotations

from collections.abc import Iterator
from functools import partial

import pytest

from e2e.harness import (
    POOL,
    ControllerProcess,
    admitted,
    apply,
    condition,
    flavor,
    gpu_job,
    in_pool,
    pool_taint,
    priority_class,
    running_controller,
    running_pods,
    wait_for,
    workload_of,
)
from queuectl.api import names
from queuectl.testenv.cluster import Cluster
from queuectl.testenv.nodes import H100

RULES = "LessThanOrEqualToFinalShare,LessThanInitialShare"
GRACE = 3


@pytest.fixture(scope="module")
def controller(
    control_plane: Cluster, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ControllerProcess]:
    """This module's controller, with fair-sharing preemption on."""
    log_dir = tmp_path_factory.mktemp("controller-fair")
    with running_controller(control_plane, log_dir, ["--fair-sharing-preemption", RULES]) as proc:
        yield proc


def team_queue(name: str, namespace: str, cohort: str, fl: str) -> dict[str, object]:
    return {
        "apiVersion": names.API_VERSION,
        "kind": "ClusterQueue",
        "metadata": {"name": name},
        "spec": {
            "cohortName": cohort,
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}},
            "preemption": {"reclaimWithinCohort": "Any"},
            "resourceGroups": [
                {
                    "coveredResources": [names.GPU_RESOURCE],
                    "flavors": [
                        {"name": fl, "resources": [{"name": names.GPU_RESOURCE, "nominalQuota": 0}]}
                    ],
                }
            ],
        },
    }


def test_a_team_at_share_zero_takes_back_the_newest_borrowed_job_after_its_grace_period(
    control_plane: Cluster, controller: ControllerProcess, namespace: str
) -> None:
    prefix = f"fs-{namespace}"[:40]
    control_plane.add_gpu_nodes(
        1, name_prefix=prefix, labels={POOL: prefix}, taints=[pool_taint(prefix)]
    )
    cohort, pc = f"org-{namespace}", f"equal-{namespace}"
    apply(
        control_plane,
        in_pool(flavor(prefix, H100), prefix),
        {
            "apiVersion": names.API_VERSION,
            "kind": "Cohort",
            "metadata": {"name": cohort},
            "spec": {
                "resourceGroups": [
                    {
                        "coveredResources": [names.GPU_RESOURCE],
                        "flavors": [
                            {
                                "name": prefix,
                                "resources": [{"name": names.GPU_RESOURCE, "nominalQuota": 8}],
                            }
                        ],
                    }
                ]
            },
        },
        team_queue(f"a-{namespace}", namespace, cohort, prefix),
        team_queue(f"b-{namespace}", namespace, cohort, prefix),
        *(
            {
                "apiVersion": names.API_VERSION,
                "kind": "LocalQueue",
                "metadata": {"name": team, "namespace": namespace},
                "spec": {"clusterQueue": f"{team}-{namespace}"},
            }
            for team in ("a", "b")
        ),
        priority_class(pc, 100, grace=GRACE),
    )
    for job in ("b-0", "b-1"):
        apply(control_plane, gpu_job(job, namespace, "b", gpus=4, priority=pc))
        wait_for(f"{job} running", partial(running_pods, control_plane, namespace, job))

    apply(control_plane, gpu_job("a-0", namespace, "a", gpus=4, priority=pc))
    victim = wait_for(
        "b's newest job preempted by share",
        lambda: (
            (wl := workload_of(control_plane, namespace, "b-1"))
            and (c := condition(wl, names.COND_PREEMPTED))
            and c.get("status") == "True"
            and c
        ),
        timeout=60,
    )
    assert victim["reason"] == names.REASON_PREEMPTED_FAIR
    wait_for("a-0 admitted", lambda: admitted(control_plane, namespace, "a-0"), timeout=60)
    wait_for("a-0 running", lambda: running_pods(control_plane, namespace, "a-0"), timeout=60)
    assert admitted(control_plane, namespace, "b-0")  # shares are even now: 4 and 4
    assert not admitted(control_plane, namespace, "b-1")
