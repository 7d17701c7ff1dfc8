"""The kubelet device plugin (API v1beta1) for `nvidia.com/gpu`, served by the agent.

`devices.py` turns the agent's inventory and health into the plugin's device list and answers
(pure); `plugin.py` serves them over gRPC on the kubelet's device plugin socket directory and
registers with the kubelet; `v1beta1/` holds the generated stubs (`gen.py` regenerates them).
"""
