"""batch/v1 Job: one pod set (`main`) of `parallelism` pods, suspended until admitted."""

from queuectl.jobs.batch.kind import JOBS, POD_SET, BatchJob, pod_count

__all__ = ["JOBS", "POD_SET", "BatchJob", "pod_count"]
