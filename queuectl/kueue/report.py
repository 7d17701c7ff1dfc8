"""What an import tells its user: every field it could not carry over, and why.

A note names the document it comes from (file and position, then kind and name), the field,
what happened to it and the reason in queuectl's terms. Nothing is left out silently: a field
the importer does not know is a note too, so a newer Kueue field shows up instead of vanishing.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from enum import StrEnum
from typing import Any


class Action(StrEnum):
    """What the importer did with a Kueue field or object."""

    DROPPED = "dropped"
    """queuectl has nothing that does what it does; the output leaves it out."""
    CHANGED = "changed"
    """Carried over with a different value or shape; the reason says how it behaves now."""
    KEPT = "kept"
    """Carried over as it is, but it behaves differently in queuectl (or does nothing yet)."""
    SKIPPED = "skipped"
    """A whole document that is not converted."""
    FOLDED = "folded"
    """A document whose content went into another object (a ProvisioningRequestConfig)."""


@dataclass(frozen=True, slots=True)
class Note:
    """One thing the user should know about the converted output."""

    document: str
    """Where it came from: `file#N Kind/name` (`#N` counts the YAML documents from 1; an
    item of a List adds `items[i]`)."""
    field: str
    """The Kueue field (`spec.admissionScope`), or empty for the whole document."""
    action: Action
    reason: str

    def line(self) -> str:
        where = f"{self.document}: {self.field}" if self.field else self.document
        return f"{where} {self.action.value}: {self.reason}"


@dataclass(frozen=True, slots=True)
class Converted:
    """One queuectl object the import produced, and the Kueue document it came from."""

    document: str
    kind: str
    name: str
    namespace: str | None = None


@dataclass(slots=True)
class Report:
    converted: list[Converted] = field(default_factory=list)
    notes: list[Note] = field(default_factory=list)

    def note(self, document: str, field_: str, action: Action, reason: str) -> None:
        self.notes.append(Note(document, field_, action, reason))

    def text(self) -> str:
        """The report as lines for a terminal: a summary, then one line per note."""
        head = (
            f"converted {len(self.converted)} object(s); "
            f"{len(self.notes)} note(s) on what did not carry over exactly"
        )
        return "\n".join([head, *(f"  {n.line()}" for n in self.notes)]) + "\n"

    def as_json(self) -> dict[str, Any]:
        """The report as data (`--report-format json`): the same facts, one key each."""
        return {
            "converted": [
                {k: v for k, v in asdict(c).items() if v is not None} for c in self.converted
            ],
            "notes": [
                {
                    "document": n.document,
                    "field": n.field,
                    "action": n.action.value,
                    "reason": n.reason,
                }
                for n in self.notes
            ],
        }


class ImportFailed(ValueError):
    """The input cannot be converted; every problem names its document and what to do.

    Raised with all the problems found, not just the first, so one run shows them all."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("\n".join(problems))
        self.problems = problems
