"""Generated from k8s.io/kubelet v0.36.3 `pkg/apis/podresources/v1/api.proto` (a copy is here,
as `podresources_v1.proto`) by `python -m queuectl.agent.podresources.gen`: do not edit,
regenerate."""
