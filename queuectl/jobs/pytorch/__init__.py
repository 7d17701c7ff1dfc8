"""Kubeflow PyTorchJob (kubeflow.org/v1, training-operator v1.8.1): master and workers as pod
sets, held by spec.runPolicy.suspend."""

from queuectl.jobs.pytorch.kind import PYTORCH_JOBS, PyTorchJob

__all__ = ["PYTORCH_JOBS", "PyTorchJob"]
