"""JobSet (sigs.k8s.io/jobset): one pod set per replicated job, held by spec.suspend."""

from queuectl.jobs.jobset.kind import JOBSETS, JobSet, replicated_job_pods

__all__ = ["JOBSETS", "JobSet", "replicated_job_pods"]
