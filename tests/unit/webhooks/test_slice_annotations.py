"""Slice and balance annotations on pod templates: read into the Workload, refused with the fix
when malformed (the webhook sees the pod count; the Topology's order is the scheduler's to say)."""

from __future__ import annotations

from typing import Any

import pytest
from webhook_cases import job, request

from queuectl import convert
from queuectl.api import Workload, names
from queuectl.api.slicing import slice_problems
from queuectl.jobs.podtemplate import topology_request
from queuectl.webhooks.jobs import validate_job
from queuectl.webhooks.lookup import InMemoryLookup

RACK, CLIQUE, HOST = names.LABEL_TOPOLOGY_RACK, names.LABEL_GPU_CLIQUE, names.LABEL_HOSTNAME
LEVELS, SIZES, BALANCED = (
    names.ANNOTATION_PODSET_SLICE_REQUIRED_TOPOLOGY,
    names.ANNOTATION_PODSET_SLICE_SIZE,
    names.ANNOTATION_PODSET_BALANCED_PLACEMENT,
)


def values(annotations: dict[str, str]) -> tuple[str | None, ...]:
    return tuple(annotations.get(k) for k in names.PODSET_TOPOLOGY_ANNOTATIONS)


@pytest.mark.parametrize(
    ("annotations", "count", "fragment"),
    [
        ({LEVELS: RACK, SIZES: "4"}, 16, None),
        ({LEVELS: f"{RACK},{CLIQUE}", SIZES: "16,4"}, 64, None),
        ({LEVELS: f"{RACK}, {CLIQUE}, {HOST}", SIZES: "16, 4, 2"}, 64, None),
        ({BALANCED: "true"}, 3, None),
        ({BALANCED: "False"}, 3, None),
        ({BALANCED: "yes"}, 3, "must be 'true' or 'false'"),
        ({LEVELS: RACK}, 16, f"annotation {LEVELS} needs {SIZES} beside it; set both"),
        ({SIZES: "4"}, 16, f"annotation {SIZES} needs {LEVELS} beside it"),
        ({LEVELS: f"{RACK},{CLIQUE}", SIZES: "4"}, 16, "lists 2 levels but"),
        ({LEVELS: RACK, SIZES: "four"}, 16, "must list whole numbers of pods of at least 1"),
        ({LEVELS: RACK, SIZES: "0"}, 16, "of at least 1"),
        ({LEVELS: f"{RACK},{CLIQUE}", SIZES: "16,5"}, 64, "slices of 5 per nvidia.com/gpu"),
        ({LEVELS: f"{RACK},{RACK}", SIZES: "16,4"}, 64, "each topology level once"),
        ({LEVELS: f"{HOST},{CLIQUE}", SIZES: "16,4"}, 64, "can only be the last"),
        ({LEVELS: f"a,b,c,{HOST}", SIZES: "16,8,4,2"}, 64, "at most 3 are supported"),
        ({LEVELS: RACK, SIZES: "8"}, 12, "12 pods do not make whole slices of 8"),
    ],
)
def test_slice_annotations_are_checked_with_the_fix(
    annotations: dict[str, str], count: int, fragment: str | None
) -> None:
    problems = slice_problems(values(annotations), count, "pod set 'main'")
    if fragment is None:
        assert problems == []
    else:
        assert len(problems) == 1 and fragment in problems[0], problems
        assert problems[0].startswith("pod set 'main': ")


def test_a_job_in_slices_of_8_per_rack_becomes_a_workload_that_asks_for_them() -> None:
    template = {
        "metadata": {
            "annotations": {
                names.ANNOTATION_PODSET_REQUIRED_TOPOLOGY: names.LABEL_TOPOLOGY_BLOCK,
                LEVELS: f"{RACK},{CLIQUE}",
                SIZES: "16,4",
                BALANCED: "true",
            }
        }
    }
    req = topology_request(template)
    assert req == {
        "required": names.LABEL_TOPOLOGY_BLOCK,
        "podSetSliceRequiredTopologyConstraints": [
            {"topology": RACK, "size": 16},
            {"topology": CLIQUE, "size": 4},
        ],
        "balancedPlacement": True,
    }
    podset = {"name": "main", "count": 64, "template": {}, "topologyRequest": req}
    Workload.model_validate(
        {"metadata": {"name": "w", "namespace": "n"}, "spec": {"podSets": [podset]}}
    )
    core = convert.podset(podset).topology
    assert core is not None
    assert core.slices == ((RACK, 16), (CLIQUE, 4)) and core.balanced
    assert core.required == names.LABEL_TOPOLOGY_BLOCK


def test_slices_alone_are_a_topology_request() -> None:
    req = topology_request({"metadata": {"annotations": {LEVELS: RACK, SIZES: "4"}}})
    assert req == {"podSetSliceRequiredTopologyConstraints": [{"topology": RACK, "size": 4}]}
    core = convert.podset({"name": "main", "count": 8, "topologyRequest": req}).topology
    assert core is not None and core.required is None and core.slices == ((RACK, 4),)


def test_a_queued_job_whose_slices_do_not_divide_its_pods_is_refused(
    lookup: InMemoryLookup,
) -> None:
    bad: dict[str, Any] = job({names.LABEL_QUEUE_NAME: "gpu"}, True)
    bad["spec"]["parallelism"] = 12
    bad["spec"]["completions"] = 12
    bad["spec"]["template"]["metadata"] = {"annotations": {LEVELS: RACK, SIZES: "8"}}
    response = validate_job(request(bad), lookup)
    assert response["allowed"] is False
    assert "12 pods do not make whole slices of 8" in response["status"]["message"]
    bad["spec"]["template"]["metadata"]["annotations"][SIZES] = "4"
    assert validate_job(request(bad), lookup)["allowed"] is True
