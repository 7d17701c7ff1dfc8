"""Generated from k8s.io/kubelet v0.36.3 `pkg/apis/deviceplugin/v1beta1/api.proto` (a copy is
here) by `python -m queuectl.agent.deviceplugin.gen`: do not edit, regenerate."""
