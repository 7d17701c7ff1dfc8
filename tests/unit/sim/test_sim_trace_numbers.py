"""Every number of a trace row is checked before a job exists: a planner who pastes `inf`, a
fraction of a pod or a 400-digit count gets the file, the line, the field and what it may be,
never a traceback, a job of 0 pods reported finished, or a summary with NaN in it."""

from __future__ import annotations

import json
from dataclasses import fields

import pytest

from queuectl.sim import SimInputError
from queuectl.sim.trace import BOUNDS, MAX_GPUS, MAX_PODS, MAX_SECONDS, Job, parse_trace

GOOD = {"submit": 0, "namespace": "team-a", "queue": "q", "pods": 2, "gpus": 8, "runtime": 60}
CSV_HEADER = "submit,namespace,queue,pods,gpus,runtime,checkpoint,max_exec\n"


def jsonl(**changes: object) -> str:
    row = {**GOOD, **changes}
    return json.dumps({k: v for k, v in row.items() if v is not None}) + "\n"


def csv_row(**changes: str) -> str:
    row = {"submit": "0", "namespace": "team-a", "queue": "q", "pods": "2", "gpus": "8",
           "runtime": "60", "checkpoint": "", "max_exec": ""}  # fmt: skip
    row.update(changes)
    return CSV_HEADER + ",".join(row[k] for k in CSV_HEADER.strip().split(",")) + "\n"


# (field, value as JSON writes it, what the error says may be given)
REFUSED_JSON = [
    ("pods", 1e400, "a whole number of pods"),  # JSON's 1e400 reads as infinity
    ("pods", float("inf"), "a whole number of pods"),
    ("pods", 0.5, "a whole number of pods"),
    ("pods", 0, "1 to 100,000"),
    ("pods", -3, "1 to 100,000"),
    ("pods", MAX_PODS + 1, "1 to 100,000"),
    ("pods", True, "not a number"),
    ("pods", "many", "not a number"),
    ("gpus", 1e400, "a whole number of GPUs per pod"),
    ("gpus", float("nan"), "a whole number of GPUs per pod"),
    ("gpus", 2.5, "a whole number of GPUs per pod"),
    ("gpus", MAX_GPUS + 1, "0 to 1,024"),
    ("gpus", [8], "not a number"),
    ("submit", float("inf"), "seconds from the start"),
    ("submit", float("nan"), "seconds from the start"),
    ("submit", -1, "seconds from the start"),
    ("submit", MAX_SECONDS * 2, "315,360,000"),
    ("runtime", float("inf"), "more than 0"),
    ("runtime", float("-inf"), "more than 0"),
    ("runtime", 0, "more than 0"),
    ("runtime", 1e300, "315,360,000"),
    ("checkpoint", float("inf"), "0 (none)"),
    ("checkpoint", -60, "0 (none)"),
    ("max_exec", float("nan"), "0 (none)"),
    ("max_exec", 1e400, "0 (none)"),
]


@pytest.mark.parametrize(("field", "value", "allowed"), REFUSED_JSON)
def test_a_bad_number_in_a_json_line_names_file_line_field_and_what_is_allowed(
    field: str, value: object, allowed: str
) -> None:
    text = jsonl(name="fine") + jsonl(name="bad", **{field: value})
    with pytest.raises(SimInputError) as err:
        parse_trace(text, "week.jsonl")
    message = str(err.value)
    assert message.startswith(f"week.jsonl:2: '{field}' is ")
    assert allowed in message


@pytest.mark.parametrize(
    ("field", "value", "allowed"),
    [
        ("pods", "1e400", "a whole number of pods"),
        ("pods", "inf", "a whole number of pods"),
        ("pods", "0.5", "a whole number of pods"),
        ("pods", "0", "1 to 100,000"),
        ("gpus", "Infinity", "a whole number of GPUs per pod"),
        ("gpus", "nan", "a whole number of GPUs per pod"),
        ("submit", "inf", "seconds from the start"),
        ("runtime", "NaN", "more than 0"),
        ("runtime", "1e400", "more than 0"),
        ("checkpoint", "-inf", "0 (none)"),
        ("max_exec", "inf", "0 (none)"),
    ],
)
def test_a_bad_number_in_a_csv_row_names_file_line_field_and_what_is_allowed(
    field: str, value: str, allowed: str
) -> None:
    with pytest.raises(SimInputError) as err:
        parse_trace(csv_row(**{field: value}), "week.csv")
    message = str(err.value)
    assert message.startswith(f"week.csv:2: '{field}' is ")
    assert allowed in message


@pytest.mark.parametrize(
    ("text", "pods", "gpus"),
    [
        (jsonl(pods=2.0, gpus=8.0), 2, 8),  # a whole number written as a float is that number
        (csv_row(pods="2.0", gpus="8"), 2, 8),  # CSV numbers have always read through float()
        (jsonl(pods=None, gpus=None), 1, 0),  # absent: one pod, no GPUs
        (jsonl(gpus=0), 2, 0),
    ],
)
def test_whole_numbers_in_any_spelling_and_the_defaults_are_read(
    text: str, pods: int, gpus: int
) -> None:
    (job,) = parse_trace(text, "t")
    assert (job.pods, job.gpus) == (pods, gpus)
    assert isinstance(job.pods, int) and isinstance(job.gpus, int)


def test_every_numeric_field_of_a_job_has_bounds() -> None:
    """A numeric field added to the trace without bounds would be read unchecked."""
    numeric = {f.name for f in fields(Job) if f.type in ("int", "float", "float | None")}
    assert numeric == set(BOUNDS)
