"""One package per job kind, each holding what the controller and the webhooks need of it
behind one interface (`JobKind`), and the helpers every kind shares (docs/design/jobs.md).

Imports only queuectl.api and queuectl.core; the controller, webhooks, agent and CLI import it.
"""

from queuectl.jobs.kind import (
    Finished,
    InputRef,
    JobKind,
    JsonPatch,
    MissingInput,
    PlacesChildren,
    PodPin,
    PodSet,
    PodSetPlacement,
    ReadsInputs,
)

__all__ = [
    "Finished",
    "InputRef",
    "JobKind",
    "JsonPatch",
    "MissingInput",
    "PlacesChildren",
    "PodPin",
    "PodSet",
    "PodSetPlacement",
    "ReadsInputs",
]
