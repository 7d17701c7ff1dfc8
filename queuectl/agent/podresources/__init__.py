"""The kubelet's PodResources API (v1 List): which devices each container holds."""
