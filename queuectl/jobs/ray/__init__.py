"""KubeRay's RayCluster and RayJob (ray.io/v1, ray-operator v1.5.0): the head and each worker
group as pod sets (plus a RayJob's submitter pod), held by spec.suspend."""

from queuectl.jobs.ray.raycluster import RAY_CLUSTERS, RayCluster
from queuectl.jobs.ray.rayjob import RAY_JOBS, RayJob

__all__ = ["RAY_CLUSTERS", "RAY_JOBS", "RayCluster", "RayJob"]
