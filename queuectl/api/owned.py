"""Every label, annotation, scheduling gate and well-known value queuectl writes, and whose it is.

Quota decisions read some of these keys back (which Workload a pod belongs to, which device stood
in for a GPU, which pod set an ungated pod was admitted in), so a key queuectl writes must be
written by queuectl alone: the validating webhooks refuse any other writer who adds, changes or
removes one (`webhooks/owned.py`, docs/design/webhooks.md "Our keys are ours"). Users' keys are
listed too, so that a test can find every key literal in the code in one of these sets: a new
key cannot be added without saying whose it is.
"""

from __future__ import annotations

from typing import Final

from queuectl.api import names

# --- queuectl's own: only the controller adds, changes or removes them --------------------
OWNED_LABELS: Final = frozenset(
    {
        names.LABEL_WORKLOAD,  # a job, its pod templates, a group's pods: whose Workload
        names.LABEL_PLACEHOLDER_FOR,  # capacity placeholder pods (never foreign usage)
        names.LABEL_PLACEHOLDER_POD_SET,
    }
)
OWNED_ANNOTATIONS: Final = frozenset(
    {
        names.ANNOTATION_PREEMPTION_DEADLINE,  # a job or pod being preempted
        names.ANNOTATION_POD_SET,  # the pod set an ungated pod was admitted in
        names.ANNOTATION_GPU_RESOURCE,  # the device standing in for nvidia.com/gpu
        names.ANNOTATION_POD_PINS,  # where each pod index of an admitted job goes
        names.ANNOTATION_TRAINJOB_RUNTIME,  # a TrainJob's runtime when it was queued
    }
)
OWNED_GATES: Final = frozenset({names.SCHEDULING_GATE_ADMISSION})
"""Scheduling gates: only the controller lifts ours. Adding one only holds a pod back (and the
mutating webhook adds it to every queued pod), so only its removal is the controller's."""

SET_BY_MUTATION: Final = frozenset({names.ANNOTATION_TRAINJOB_RUNTIME})
"""Owned keys queuectl's mutating webhook writes into a user's own CREATE, so the validating
webhook sees them under the user's name: on CREATE each is checked by its own rule (the
TrainJob's record must be exactly what the webhook writes from the runtime, webhooks/inputs.py);
on UPDATE they are owned like the rest."""

# --- the cluster-queue label: derived, checked for agreement --------------------------------
DERIVED_LABELS: Final = frozenset({names.LABEL_CLUSTER_QUEUE})
"""Set by the mutating webhook from the LocalQueue the queue label names; a user may leave it
as it is or let a queue change re-derive it, and a value that contradicts the LocalQueue is
refused (webhooks/jobs.py)."""

# --- users' keys, by design ------------------------------------------------------------------
USER_LABELS: Final = frozenset(
    {
        names.LABEL_QUEUE_NAME,
        names.LABEL_PRIORITY_CLASS,
        names.LABEL_MAX_EXEC_TIME,
        names.LABEL_POD_GROUP_NAME,
    }
)
USER_ANNOTATIONS: Final = frozenset(
    {names.ANNOTATION_POD_GROUP_TOTAL_COUNT, *names.PODSET_TOPOLOGY_ANNOTATIONS}
)

# --- Nodes: written by the GPU agent and the controller's auto-drain, or by admins ------------
NODE_KEYS: Final = frozenset(
    {
        names.LABEL_GPU_NVLINK,
        names.LABEL_GPU_HEALTHY_COUNT,
        names.ANNOTATION_GPU_TOPOLOGY_MATRIX,
        names.ANNOTATION_GPU_HEALTH,
        names.ANNOTATION_MIG_LAYOUT,
        names.ANNOTATION_GPU_USE,
        names.ANNOTATION_NODE_DRAINED,
        names.TAINT_GPU_UNHEALTHY,
        names.TAINT_GPU_UNKNOWN,
    }
)
"""Only node agents and cluster admins write Nodes (RBAC); no webhook guards them."""
ADMIN_NODE_LABELS: Final = frozenset(
    {names.LABEL_GPU_AGENT, names.LABEL_TOPOLOGY_BLOCK, names.LABEL_TOPOLOGY_RACK}
)
"""Set by admins on their nodes: opt a node into the agent, topology levels of the samples."""

# --- values that are not object keys ---------------------------------------------------------
OTHER_NAMES: Final = frozenset(
    {names.API_VERSION, names.CHECK_ALWAYS_READY, names.CHECK_PROVISIONING}
)
"""The API version, and the controllerName values of queuectl's admission checks."""

TEST_ONLY_PREFIX: Final = "testenv.queuectl.io/"
"""Keys of the local control plane (queuectl/testenv): fake nodes and test namespaces only."""

ALL_KEYS: Final = (
    OWNED_LABELS
    | OWNED_ANNOTATIONS
    | OWNED_GATES
    | DERIVED_LABELS
    | USER_LABELS
    | USER_ANNOTATIONS
    | NODE_KEYS
    | ADMIN_NODE_LABELS
    | OTHER_NAMES
)
