"""e2e scenarios share the controller process and the helpers of `e2e.harness`."""

from e2e.harness import controller

__all__ = ["controller"]
