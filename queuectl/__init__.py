"""queuectl: Kubernetes-native queueing for GPU batch work."""

__version__ = "0.1.0"
