"""Admission for a kind whose pod sets sit partly in another object (`ReadsInputs`: a TrainJob
reads its runtime). The mutating webhook records what the job needs of that object when the job
is created queued; the validating webhook refuses a record that does not match (a forged or
stale annotation) and whatever the kind refuses itself (its `problems`). The object comes from
the controller's cache, as every lookup does (docs/design/jobs.md, "Kubeflow TrainJob").
"""

from __future__ import annotations

from queuectl.api.resource import Obj
from queuectl.jobs import JobKind, JsonPatch, MissingInput, ReadsInputs
from queuectl.webhooks.lookup import QueueLookup


async def read_current(kind: JobKind, job: Obj, lookup: QueueLookup) -> None:
    """Before a job's CREATE is decided: the input it names is read from the API server
    (`QueueLookup.read_input`, one GET), so the record is the input as it stands now: a
    runtime applied in the same `kubectl apply` as its TrainJob is found, not refused as
    missing, and a runtime changed a moment before is recorded as changed (trainer builds the
    JobSet from it) by the mutating webhook and checked against the same by the validating
    one, whichever replica's watch is behind."""
    if not isinstance(kind, ReadsInputs):
        return
    ref = kind.input_ref(job)
    await lookup.read_input(ref.resource, ref.namespace, ref.name)


def _found(kind: ReadsInputs, job: Obj, lookup: QueueLookup) -> Obj | None:
    ref = kind.input_ref(job)
    return lookup.input_object(ref.resource, ref.namespace, ref.name)


def snapshot_ops(kind: JobKind, job: Obj, lookup: QueueLookup) -> tuple[JsonPatch, str | None]:
    """(ops recording the input into a job created queued, or the refusal when it is missing)."""
    if not isinstance(kind, ReadsInputs):
        return [], None
    try:
        return kind.snapshot_ops(job, _found(kind, job, lookup)), None
    except MissingInput as err:
        return [], str(err)


def create_problems(kind: JobKind, job: Obj, lookup: QueueLookup, queued: bool) -> list[str]:
    """A queued job's record must be exactly what the mutating webhook writes from its input."""
    if not isinstance(kind, ReadsInputs):
        return []
    problems = kind.problems(None, job)
    if queued:
        ops, missing = snapshot_ops(kind, job, lookup)
        if missing is not None:
            problems.append(missing)
        elif ops:
            problems.append(
                f"its record of {kind.input_ref(job).resource.kind} "
                f"{kind.input_ref(job).name!r} is set by queuectl's mutating webhook from that "
                "object; leave it out (or check that the mutating webhook is installed)"
            )
    return problems


def update_problems(kind: JobKind, old: Obj, job: Obj) -> list[str]:
    return kind.problems(old, job) if isinstance(kind, ReadsInputs) else []
