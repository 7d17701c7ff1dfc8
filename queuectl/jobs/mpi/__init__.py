"""Kubeflow MPIJob (kubeflow.org/v2beta1, mpi-operator v0.6.0): the launcher and the workers as
pod sets of one gang, held by spec.runPolicy.suspend."""

from queuectl.jobs.mpi.kind import MPI_JOBS, MPIJob

__all__ = ["MPI_JOBS", "MPIJob"]
