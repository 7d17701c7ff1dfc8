"""An emulated NVML: `libnvidia-ml.so.1` built here from C, answering for a described node.

The agent's real NVML path (`NvmlReader` over the unmodified nvidia-ml-py) runs against it without
a GPU: `describe` compiles a node description (the scripted-scenario YAML) into the library's
input, `build` compiles the library with gcc (cached by source hash) and makes the environment
of a child process that loads it. `python -m queuectl.agent.nvmlemu run NODE.yaml -- CMD` runs a
command on an emulated node. How it works and what it covers: docs/design/agent.md.
"""

from queuectl.agent.nvmlemu.build import (
    EmulatorBuildError,
    build_library,
    environment,
    write_description,
)
from queuectl.agent.nvmlemu.describe import DescriptionError, compile_description

__all__ = [
    "DescriptionError",
    "EmulatorBuildError",
    "build_library",
    "compile_description",
    "environment",
    "write_description",
]
