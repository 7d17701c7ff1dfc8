"""The opt-in that reads Kueue's queue label (`kueue.x-k8s.io/queue-name`) as queuectl's.

Teams moving from Kueue keep the tooling that labels their jobs for Kueue. With the setting
on (`queuectl controller --kueue-queue-label`), the Job mutating webhook takes a new job's Kueue
queue label as its queue when it has no `queuectl.io/queue-name`, and writes that label with
the same value; from then on the job is an ordinary queued job to the validating webhook, the
controller and the CLI, which read only queuectl's label. A job whose two labels name
different LocalQueues is refused, on create and on any change of either label: there is no
telling which queue was meant. Kueue must not manage the same jobs meanwhile (it would suspend
and admit them too): turn the setting on where Kueue's webhooks no longer act.
"""

from __future__ import annotations

from collections.abc import Mapping

from queuectl.api import names

Labels = Mapping[str, str]


def queue_name(labels: Labels, honour_kueue: bool) -> str | None:
    """The LocalQueue a job's labels name: queuectl's label, else (when honoured) Kueue's."""
    queue = labels.get(names.LABEL_QUEUE_NAME)
    if queue is None and honour_kueue:
        return labels.get(names.LABEL_KUEUE_QUEUE_NAME)
    return queue


def disagreement(labels: Labels, old: Labels | None = None) -> str | None:
    """Why the labels are refused: both present and naming different LocalQueues (on an
    update, only when the request changes one of them, so that unrelated writes to a job
    made before the setting was on are not blocked)."""
    ours = labels.get(names.LABEL_QUEUE_NAME)
    theirs = labels.get(names.LABEL_KUEUE_QUEUE_NAME)
    if ours is None or theirs is None or ours == theirs:
        return None
    keys = (names.LABEL_QUEUE_NAME, names.LABEL_KUEUE_QUEUE_NAME)
    if old is not None and all(old.get(k) == labels.get(k) for k in keys):
        return None
    return (
        f"labels {names.LABEL_QUEUE_NAME}={ours!r} and {names.LABEL_KUEUE_QUEUE_NAME}={theirs!r} "
        "name different LocalQueues; remove one of them or make both name the same queue"
    )
