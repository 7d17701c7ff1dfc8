"""Kubeflow TrainJob (trainer.kubeflow.org/v1alpha1, trainer v2.1.0): its runtime's replicated
jobs as pod sets, snapshotted on CREATE; held by spec.suspend; placed through
spec.podTemplateOverrides."""

from queuectl.jobs.trainjob.kind import TRAIN_JOBS, TrainJob
from queuectl.jobs.trainjob.runtime import CLUSTER_RUNTIMES, RUNTIMES

__all__ = ["CLUSTER_RUNTIMES", "RUNTIMES", "TRAIN_JOBS", "TrainJob"]
