"""The TrainJob tests' manifests: trainer's own runtimes and a TrainJob naming one, as the
mutating webhook leaves it (tests/unit/jobs/samples/trainjob-runtimes.yaml)."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import yaml

from queuectl.jobs.trainjob import TrainJob

SAMPLES = Path(__file__).parent / "samples" / "trainjob-runtimes.yaml"
KIND = TrainJob()


def docs() -> dict[str, dict[str, Any]]:
    """Every sample by name: runtimes and the `pretrain` TrainJob (4 nodes x 8 GPUs)."""
    return {d["metadata"]["name"]: d for d in yaml.safe_load_all(SAMPLES.read_text())}


def created(runtime: str = "torch-distributed", **trainer: Any) -> dict[str, Any]:
    """The `pretrain` TrainJob naming `runtime` (trainer fields changed, None removes one), as
    the mutating webhook leaves it: suspended, its runtime recorded."""
    found = docs()
    job = copy.deepcopy(found["pretrain"])
    job["spec"]["runtimeRef"]["name"] = runtime
    job["spec"]["trainer"].update(trainer)
    job["spec"]["trainer"] = {k: v for k, v in job["spec"]["trainer"].items() if v is not None}
    job["spec"]["suspend"] = True
    for op in KIND.snapshot_ops(job, found[runtime]):
        job["metadata"].setdefault("annotations", {}).update(op["value"])
    return job
