"""Every label, annotation, condition type, reason and well-known name queuectl uses.

One module so that the webhooks, the controller, the agent and the CLI can never disagree on a
spelling. Values follow DESIGN.md §2; GPU node labels reuse NVIDIA GPU Feature Discovery names.
"""

from typing import Final

GROUP: Final = "queuectl.io"
VERSION: Final = "v1beta1"
API_VERSION: Final = f"{GROUP}/{VERSION}"
FIELD_MANAGER: Final = "queuectl-controller"
SYSTEM_NAMESPACE: Final = "queuectl-system"

# --- Job labels set by users -------------------------------------------------------------
LABEL_QUEUE_NAME: Final = "queuectl.io/queue-name"
LABEL_PRIORITY_CLASS: Final = "queuectl.io/priority-class"
LABEL_MAX_EXEC_TIME: Final = "queuectl.io/max-exec-time-seconds"
DEFAULT_LOCAL_QUEUE: Final = "default"
LABEL_KUEUE_QUEUE_NAME: Final = "kueue.x-k8s.io/queue-name"
"""Kueue's queue label: read as LABEL_QUEUE_NAME when the controller runs with
--kueue-queue-label (webhooks/kueue_label.py); never written."""

# --- Labels and annotations the system sets ----------------------------------------------
LABEL_CLUSTER_QUEUE: Final = "queuectl.io/cluster-queue"
LABEL_WORKLOAD: Final = "queuectl.io/workload"
ANNOTATION_PREEMPTION_DEADLINE: Final = "queuectl.io/preemption-deadline"
# A TrainJob's runtime as it was when the TrainJob was created (jobs/trainjob): its pod sets.
ANNOTATION_TRAINJOB_RUNTIME: Final = "queuectl.io/trainjob-runtime"
# Plain pod groups (jobs/podgroup): the names Kueue users know, under queuectl.io.
LABEL_POD_GROUP_NAME: Final = "queuectl.io/pod-group-name"
ANNOTATION_POD_GROUP_TOTAL_COUNT: Final = "queuectl.io/pod-group-total-count"
SCHEDULING_GATE_ADMISSION: Final = "queuectl.io/admission"
ANNOTATION_POD_SET: Final = "queuectl.io/pod-set"  # the pod set an ungated pod was admitted in
# On an admitted job's pod template: where each pod index goes (jobs/pinning.py); the pod webhook
# turns it into the pod's own node affinity when the pod is created.
ANNOTATION_POD_PINS: Final = "queuectl.io/pod-pins"
# Where a pod's index sits: an Indexed Job's completion index, a JobSet child Job's index, an
# LWS pod's place in its group (the leader is 0), a Kubeflow replica's index within its type.
LABEL_JOB_COMPLETION_INDEX: Final = "batch.kubernetes.io/job-completion-index"
LABEL_JOBSET_JOB_INDEX: Final = "jobset.sigs.k8s.io/job-index"
LABEL_LWS_WORKER_INDEX: Final = "leaderworkerset.sigs.k8s.io/worker-index"
LABEL_KUBEFLOW_REPLICA_INDEX: Final = "training.kubeflow.org/replica-index"
ANNOTATION_PODSET_REQUIRED_TOPOLOGY: Final = "queuectl.io/podset-required-topology"
ANNOTATION_PODSET_PREFERRED_TOPOLOGY: Final = "queuectl.io/podset-preferred-topology"
# Pod sets of one job naming the same group share one domain of their level (Kueue's PodSetGroup).
ANNOTATION_PODSET_GROUP_NAME: Final = "queuectl.io/podset-group-name"
# Slices of a pod set, each in one domain of a level (Kueue's names, under queuectl.io). Several
# levels, outermost first, as comma-separated lists of the same length ("rack,clique" / "16,4").
ANNOTATION_PODSET_SLICE_REQUIRED_TOPOLOGY: Final = "queuectl.io/podset-slice-required-topology"
ANNOTATION_PODSET_SLICE_SIZE: Final = "queuectl.io/podset-slice-size"
# "true": spread the pods (or slices) evenly over the domains chosen, instead of packing them.
ANNOTATION_PODSET_BALANCED_PLACEMENT: Final = "queuectl.io/podset-balanced-placement"
# A pod set's topology request, in this order: (required, preferred, group, slice levels,
# slice sizes, balanced).
PODSET_TOPOLOGY_ANNOTATIONS: Final = (
    ANNOTATION_PODSET_REQUIRED_TOPOLOGY,
    ANNOTATION_PODSET_PREFERRED_TOPOLOGY,
    ANNOTATION_PODSET_GROUP_NAME,
    ANNOTATION_PODSET_SLICE_REQUIRED_TOPOLOGY,
    ANNOTATION_PODSET_SLICE_SIZE,
    ANNOTATION_PODSET_BALANCED_PLACEMENT,
)

# --- GPU node labels (GFD-compatible) and ours -------------------------------------------
GPU_RESOURCE: Final = "nvidia.com/gpu"
LABEL_GPU_PRODUCT: Final = "nvidia.com/gpu.product"
LABEL_GPU_COUNT: Final = "nvidia.com/gpu.count"
LABEL_GPU_MEMORY: Final = "nvidia.com/gpu.memory"
LABEL_GPU_FAMILY: Final = "nvidia.com/gpu.family"
LABEL_GPU_COMPUTE_MAJOR: Final = "nvidia.com/gpu.compute.major"
LABEL_GPU_COMPUTE_MINOR: Final = "nvidia.com/gpu.compute.minor"
LABEL_GPU_CLIQUE: Final = "nvidia.com/gpu.clique"
LABEL_GPU_NVLINK: Final = "gpu.queuectl.io/nvlink"
LABEL_GPU_HEALTHY_COUNT: Final = "gpu.queuectl.io/healthy-count"
ANNOTATION_GPU_TOPOLOGY_MATRIX: Final = "gpu.queuectl.io/topology-matrix"
# GPU sharing (docs/design/gpu-sharing.md): GFD's MIG and time-slicing labels, and the pod-template
# annotation that records which device stood in for nvidia.com/gpu at admission.
LABEL_MIG_CAPABLE: Final = "nvidia.com/mig.capable"
LABEL_MIG_STRATEGY: Final = "nvidia.com/mig.strategy"
LABEL_GPU_REPLICAS: Final = "nvidia.com/gpu.replicas"
LABEL_GPU_SHARING_STRATEGY: Final = "nvidia.com/gpu.sharing-strategy"
RESOURCE_GPU: Final = "nvidia.com/gpu"
RESOURCE_MIG_PREFIX: Final = "nvidia.com/mig-"
ANNOTATION_GPU_RESOURCE: Final = "gpu.queuectl.io/gpu-resource"
ANNOTATION_MIG_LAYOUT: Final = "gpu.queuectl.io/mig-layout"
TAINT_GPU_UNHEALTHY: Final = "gpu.queuectl.io/unhealthy"
# Set by the controller (NoSchedule) on a node whose agent stopped refreshing its GPUHealthy
# heartbeat: nobody vouches for its GPUs, so nothing new is placed there; removed once it beats.
TAINT_GPU_UNKNOWN: Final = "gpu.queuectl.io/unknown"
NODE_CONDITION_GPU_HEALTHY: Final = "GPUHealthy"

# Topology levels used by the samples and the fake nodes of testenv.
LABEL_TOPOLOGY_BLOCK: Final = "topology.queuectl.io/block"
LABEL_TOPOLOGY_RACK: Final = "topology.queuectl.io/rack"
LABEL_HOSTNAME: Final = "kubernetes.io/hostname"
# Set by the API server on every Namespace: a selector can always match a namespace by name.
LABEL_NAMESPACE_NAME: Final = "kubernetes.io/metadata.name"

# --- Workload condition types ------------------------------------------------------------
COND_QUOTA_RESERVED: Final = "QuotaReserved"
COND_ADMITTED: Final = "Admitted"
COND_EVICTED: Final = "Evicted"
COND_PREEMPTED: Final = "Preempted"
COND_REQUEUED: Final = "Requeued"
COND_FINISHED: Final = "Finished"
# Every admitted pod Ready (or done) at once; False (PodsNotReady) when a running gang lost one.
COND_PODS_READY: Final = "PodsReady"
REASON_PODS_READY: Final = "PodsReady"
REASON_PODS_NOT_READY: Final = "PodsNotReady"
# Queue condition type.
COND_ACTIVE: Final = "Active"

# --- Reasons (CamelCase, stable: dashboards and `queuectl describe` key on them) ----------
REASON_PENDING: Final = "Pending"
REASON_WAITING_FOR_QUOTA: Final = "WaitingForQuota"
REASON_EXCEEDS_MAX_QUOTA: Final = "ExceedsMaxQuota"
REASON_NO_MATCHING_FLAVOR: Final = "NoMatchingFlavor"
REASON_TOPOLOGY_PLACEMENT_FAILED: Final = "TopologyPlacementFailed"
REASON_WAITING_FOR_PREEMPTED: Final = "WaitingForPreemptedWorkloads"
REASON_WAITING_FOR_PODS_READY: Final = "WaitingForPodsReady"
"""A flavor it needs is held until another workload's pods are all Ready (block admission)."""
REASON_INACTIVE: Final = "Inactive"
REASON_CLUSTER_QUEUE_STOPPED: Final = "ClusterQueueStopped"
REASON_LOCAL_QUEUE_STOPPED: Final = "LocalQueueStopped"
REASON_CLUSTER_QUEUE_NOT_FOUND: Final = "ClusterQueueNotFound"
REASON_LOCAL_QUEUE_NOT_FOUND: Final = "LocalQueueNotFound"
# A Workload naming a WorkloadPriorityClass that does not exist waits (it is not admitted at a
# guessed priority); it is queued at the class's value once the class is created.
REASON_PRIORITY_CLASS_NOT_FOUND: Final = "WorkloadPriorityClassNotFound"
# A Workload naming a WorkloadPriorityClass whose namespaceSelector leaves out its namespace.
REASON_PRIORITY_CLASS_NOT_ALLOWED: Final = "WorkloadPriorityClassNotAllowed"
REASON_INVALID_SPEC: Final = "InvalidSpec"
REASON_CLUSTER_QUEUE_INACTIVE: Final = "ClusterQueueInactive"  # bad spec: unknown flavor, cycle
REASON_QUOTA_RESERVED: Final = "QuotaReserved"
REASON_ADMITTED: Final = "Admitted"
REASON_PREEMPTED_RECLAIM: Final = "InCohortReclamation"
REASON_PREEMPTED_WITHIN_CQ: Final = "InClusterQueue"
REASON_PREEMPTED_BORROW: Final = "InCohortReclaimWhileBorrowing"
REASON_PREEMPTED_CREDIT: Final = "InCohortReclaimWithCredit"  # GPU time banking
REASON_PREEMPTED_FAIR: Final = "InCohortFairSharing"  # fair-sharing preemption
REASON_EVICTED_PREEMPTION: Final = "Preempted"
REASON_EVICTED_NODE_FAILURES: Final = "NodeFailures"
REASON_EVICTED_MAX_EXEC_TIME: Final = "MaximumExecutionTimeExceeded"
# The Job changed under a Workload holding quota (its shape or its queue): the quota no longer
# describes it, so it is stopped and requeued as it now is.
REASON_EVICTED_JOB_CHANGED: Final = "JobChanged"
REASON_EVICTED_STOPPED: Final = "ClusterQueueStopped"
# Its running pods exceed its admission (more pods or GPUs, another flavor's nodes), whatever
# way they got there: the enforcement loop stops it and requeues it (controller.md).
REASON_EVICTED_PODS_EXCEED_ADMISSION: Final = "PodsExceedAdmission"
# A child its operator made from the job before the job was placed, and started (an MPIJob's
# launcher Job): its template is frozen, so the job is stopped and requeued at its position
# (docs/design/jobs.md, "MPIJob").
REASON_EVICTED_CHILD_UNPLACED: Final = "ChildStartedUnplaced"
REASON_REQUEUED_BACKOFF: Final = "BackoffFinished"
REASON_FINISHED_SUCCEEDED: Final = "Succeeded"
REASON_FINISHED_FAILED: Final = "Failed"
REASON_READY: Final = "Ready"
# Two-phase admission (docs/design/admission-checks.md). A ClusterQueue naming a check that does
# not exist, or is not Active, is inactive with one of these reasons (as in Kueue).
REASON_ADMISSION_CHECK_NOT_FOUND: Final = "AdmissionCheckNotFound"
REASON_ADMISSION_CHECK_INACTIVE: Final = "AdmissionCheckInactive"
# The built-in trivial check controller (queuectl/controller/admission/builtin_checks.py).
CHECK_ALWAYS_READY: Final = "queuectl.io/always-ready"
# The built-in capacity check (docs/design/provisioning.md): queued demand grows the fleet.
CHECK_PROVISIONING: Final = "queuectl.io/provisioning"
# Its placeholder pods: which Workload (name, same namespace) and pod set each stands for.
LABEL_PLACEHOLDER_FOR: Final = "queuectl.io/placeholder-for"
LABEL_PLACEHOLDER_POD_SET: Final = "queuectl.io/placeholder-pod-set"
# The lowest PriorityClass, created by queuectl, that placeholder pods run at.
PRIORITY_CLASS_PLACEHOLDER: Final = "queuectl-capacity-placeholder"
PRIORITY_PLACEHOLDER_VALUE: Final = -1_000_000_000
# The check's parameters that select cluster-autoscaler's ProvisioningRequest instead.
PROVREQ_GROUP: Final = "autoscaling.x-k8s.io"
PROVREQ_PARAMETERS_KIND: Final = "ProvisioningRequestClass"
PROVREQ_CLASSES: Final = (
    "check-capacity.autoscaling.x-k8s.io",
    "best-effort-atomic-scale-up.autoscaling.x-k8s.io",
)
# Quota reserved, Admitted=False until every check is Ready.
REASON_WAITING_FOR_CHECKS: Final = "WaitingForAdmissionChecks"
# Evicted (reservation released) because a check said Retry; requeued with back-off.
REASON_EVICTED_CHECK_RETRY: Final = "AdmissionCheck"
# Deactivated because a check said Rejected.
REASON_EVICTED_CHECK_REJECTED: Final = "AdmissionCheckRejected"
# Deactivated because the API server refused to rename nvidia.com/gpu to a flavor's gpuResource
# in the suspended Job (MutablePodResourcesForSuspendedJobs off: Kubernetes before 1.36).
REASON_EVICTED_GPU_RESOURCE_REFUSED: Final = "GpuResourceRefused"
# Evicted because its pods were not all Ready within the startup timeout, or did not recover
# within the recovery timeout after one stopped being Ready; requeued with back-off.
REASON_EVICTED_PODS_READY_TIMEOUT: Final = "PodsReadyTimeout"
# Deactivated instead: it reached its requeue limit (pods never came up, time after time).
REASON_EVICTED_REQUEUE_LIMIT: Final = "RequeuingLimitExceeded"
# Evictions that also deactivate the Workload: requeueing would only meet the same answer.
DEACTIVATING_EVICTIONS: Final = (
    REASON_EVICTED_CHECK_REJECTED,
    REASON_EVICTED_GPU_RESOURCE_REFUSED,
    REASON_EVICTED_REQUEUE_LIMIT,
)

# --- GPU node agent (docs/design/agent.md) -----------------------------------------------
AGENT_FIELD_MANAGER: Final = "queuectl-agent"
# Per-GPU health detail (compact JSON, keyed by GPU UUID); lets a restarted agent keep hysteresis.
ANNOTATION_GPU_HEALTH: Final = "gpu.queuectl.io/health"
# Which container holds which GPU and how much it used over the agent's last report window
# (compact JSON, queuectl/api/gpuuse.py); the controller folds it into each Workload's status.
ANNOTATION_GPU_USE: Final = "gpu.queuectl.io/gpu-use"
# Values of the gpu.queuectl.io/nvlink label.
NVLINK_CLASS_NVSWITCH: Final = "nvswitch"
NVLINK_CLASS_FULL_MESH: Final = "full-mesh"
NVLINK_CLASS_PARTIAL_MESH: Final = "partial-mesh"
NVLINK_CLASS_PAIRS: Final = "pairs"
NVLINK_CLASS_NONE: Final = "none"
# Reasons of the GPUHealthy node condition; an unhealthy reason is also the taint's value.
REASON_GPU_ALL_HEALTHY: Final = "AllGPUsHealthy"
REASON_GPU_XID: Final = "CriticalXid"
REASON_GPU_DOUBLE_BIT_ECC: Final = "DoubleBitEccError"
REASON_GPU_RETIRED_PAGES_PENDING: Final = "RetiredPagesPending"
REASON_GPU_ROW_REMAP_PENDING: Final = "RowRemapPending"
REASON_GPU_ROW_REMAP_FAILURE: Final = "RowRemapFailure"
REASON_GPU_OVERHEATED: Final = "Overheated"
REASON_GPU_NOT_ANSWERING: Final = "GPUNotAnswering"
REASON_GPU_MISSING: Final = "GPUMissing"
REASON_GPU_MULTIPLE: Final = "MultipleGPUFaults"
REASON_GPU_NVML_UNAVAILABLE: Final = "NVMLUnavailable"

# --- Admission webhooks (docs/design/webhooks.md) ----------------------------------------
# The controller's in-cluster identity; the Job webhook lets only it (or an admitted Workload)
# unsuspend a queued Job and touch the labels/annotations the system owns.
CONTROLLER_SERVICE_ACCOUNT: Final = "queuectl-controller"
CONTROLLER_USERNAME: Final = (
    f"system:serviceaccount:{SYSTEM_NAMESPACE}:{CONTROLLER_SERVICE_ACCOUNT}"
)
WEBHOOK_SERVICE: Final = "queuectl-webhook"
WEBHOOK_PORT: Final = 9443
WEBHOOK_CERT_SECRET: Final = "queuectl-webhook-certs"
# The visibility API (docs/design/visibility.md): an aggregated API the controller serves on its
# own port, reached through the webhook Service (so the webhook certificate covers it).
VISIBILITY_GROUP: Final = "visibility.queuectl.io"
VISIBILITY_VERSION: Final = "v1beta1"
VISIBILITY_API_SERVICE: Final = f"{VISIBILITY_VERSION}.{VISIBILITY_GROUP}"
VISIBILITY_PORT: Final = 9444
VISIBILITY_SERVICE_PORT: Final = 8443
MUTATING_WEBHOOK_CONFIGURATION: Final = "queuectl-mutating"
VALIDATING_WEBHOOK_CONFIGURATION: Final = "queuectl-validating"
WEBHOOK_PATH_MUTATE_JOB: Final = "/mutate-job"
# Unlabelled Jobs (the default-LocalQueue rule): its own route, so an internal error fails open
# there (failurePolicy Ignore) while labelled Jobs fail closed.
WEBHOOK_PATH_MUTATE_UNLABELLED_JOB: Final = "/mutate-unlabelled-job"
WEBHOOK_PATH_VALIDATE_WORKLOAD: Final = "/validate-workload"
WEBHOOK_PATH_VALIDATE_JOB: Final = "/validate-job"
# Unlabelled objects a job kind's object controls (a JobSet's Jobs, a TrainJob's JobSet): their
# own route, failing open, as they are most Jobs' kind of object (a CronJob's Jobs too).
WEBHOOK_PATH_VALIDATE_OWNED_JOB: Final = "/validate-owned-job"
# A job kind's scale subresource (`kubectl scale`): its review carries an autoscaling/v1 Scale,
# not the job, so it has a route of its own that reads the job.
WEBHOOK_PATH_VALIDATE_SCALE: Final = "/validate-scale"
WEBHOOK_PATH_MUTATE_POD: Final = "/mutate-pod"
WEBHOOK_PATH_MUTATE_PINNED_POD: Final = "/mutate-pinned-pod"
WEBHOOK_PATH_VALIDATE_POD: Final = "/validate-pod"
WEBHOOK_PATH_MUTATE_LWS: Final = "/mutate-leaderworkerset"
WEBHOOK_PATH_VALIDATE_QUEUECTL: Final = "/validate-queuectl"
WEBHOOK_PATH_HEALTHZ: Final = "/healthz"

# --- Local control plane (queuectl/testenv): fake kwok nodes and test-driven pod endings ----
ANNOTATION_KWOK_NODE: Final = "kwok.x-k8s.io/node"
KWOK_NODE_FAKE: Final = "fake"
LABEL_TESTENV_FAKE_NODE: Final = "testenv.queuectl.io/fake-node"
# On a pod (or a Job's pod template) bound to a fake node: finish Succeeded / Failed after this
# duration ("0s", "30s") or at this RFC3339 time. Without either, the pod runs until deleted.
ANNOTATION_TESTENV_SUCCEED_AFTER: Final = "testenv.queuectl.io/succeed-after"
ANNOTATION_TESTENV_FAIL_AFTER: Final = "testenv.queuectl.io/fail-after"
# On a fake node or a pod (any value): its "kubelet" stopped. kwok leaves the node's status as a
# test writes it and never completes the pod's deletion (it stays Terminating, as on a dead node).
ANNOTATION_TESTENV_KUBELET_STOPPED: Final = "testenv.queuectl.io/kubelet-stopped"

# --- Controller (docs/design/controller.md) ----------------------------------------------
# Pending reason for a Workload whose LocalQueue points at a ClusterQueue that does not select
# its namespace.
REASON_NAMESPACE_NOT_SELECTED: Final = "NamespaceNotSelected"
REASON_POD_GROUP_INCOMPLETE: Final = "PodGroupIncomplete"  # withheld until its pods all exist
# Event reasons (on the Workload and its Job).
EVENT_ADMITTED: Final = "Admitted"
EVENT_QUOTA_RESERVED: Final = "QuotaReserved"  # reserved; its admission checks decide next
EVENT_PREEMPTED: Final = "Preempted"
EVENT_EVICTED: Final = "Evicted"
EVENT_REQUEUED: Final = "Requeued"
EVENT_FINISHED: Final = "Finished"
EVENT_SUSPENDED: Final = "Suspended"
EVENT_GPU_RESOURCE_REFUSED: Final = "GpuResourceRefused"
EVENT_CREATED_WORKLOAD: Final = "CreatedWorkload"
EVENT_UPDATED_WORKLOAD: Final = "UpdatedWorkload"
EVENT_FOREIGN_WORKLOAD: Final = "ForeignWorkload"  # a Workload squats a Job's Workload name
EVENT_PODS_EXCEED_ADMISSION: Final = "PodsExceedAdmission"  # names the pods beyond admission
# The Lease that elects the one active scheduler (in the system namespace).
CONTROLLER_LEASE: Final = "queuectl-controller"

# --- GPU node agent deployment (deploy/kustomize/base/agent) ------------------------------
# Opt a node into the agent DaemonSet when neither GFD nor NFD marks it as a GPU node.
LABEL_GPU_AGENT: Final = "gpu.queuectl.io/agent"
AGENT_SERVICE_ACCOUNT: Final = "queuectl-agent"

# --- Controller auto-drain (docs/design/controller.md, "Auto-drain") ----------------------
# On a Node the controller cordoned because a GPU went bad: compact JSON
# {"reason": <GPU reason>, "since": <RFC3339>, "cordoned": <whether we set unschedulable>}.
# Present while the node counts against its flavors' drain budget; removed on recovery.
ANNOTATION_NODE_DRAINED: Final = "gpu.queuectl.io/drained"
# Event reasons on a Node.
# A Workload whose GPUs stayed under its ClusterQueue's idle threshold for the window
# (docs/design/gpu-use.md): condition GPUIdle, a Warning Event, and with action Requeue or Stop
# a preemption notice (reason IdleGPUs; Stop deactivates instead of requeueing).
COND_GPU_IDLE: Final = "GPUIdle"
REASON_GPU_IDLE: Final = "IdleGPUs"
REASON_GPU_IDLE_STOP: Final = "IdleGPUsStop"  # the Preempted reason under action Stop
REASON_GPU_IN_USE: Final = "GPUsInUse"
REASON_GPU_IDLE_WINDOW: Final = "IdleWindowNotFull"  # idle again after a requeue, not long yet
EVENT_GPU_IDLE: Final = "IdleGPUs"
PREEMPTOR_IDLE_POLICY: Final = "idle-policy"
EVENT_NODE_DRAINED: Final = "NodeDrained"
EVENT_NODE_DRAIN_DEFERRED: Final = "NodeDrainDeferred"
EVENT_NODE_RESTORED: Final = "NodeRestored"
EVENT_NODE_GPUS_UNKNOWN: Final = "NodeGPUsUnknown"
EVENT_NODE_GPUS_KNOWN: Final = "NodeGPUsKnown"
# Event reason on a Workload whose pods on a failed node moved to a free node of its domain
# (node hot swap: the rest of the gang keeps running).
EVENT_NODE_HOT_SWAPPED: Final = "NodeHotSwapped"
# Drain reasons of a node that failed otherwise than by a GPU (the drained record's reason).
REASON_NODE_NOT_READY: Final = "NodeNotReady"
REASON_NODE_UNREACHABLE: Final = "NodeUnreachable"
# The reason of the gpu.queuectl.io/unknown taint.
REASON_AGENT_SILENT: Final = "AgentSilent"
# Taints the node lifecycle controller puts on a node that is not Ready or stopped reporting.
TAINT_NODE_NOT_READY: Final = "node.kubernetes.io/not-ready"
TAINT_NODE_UNREACHABLE: Final = "node.kubernetes.io/unreachable"
