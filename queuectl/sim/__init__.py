"""What-if simulation: the real scheduling core on a virtual clock.

`config` reads the manifests users apply, `nodes` the node inventory, `trace` and `generate` the
jobs; `engine` replays them through `queuectl.core.Scheduler`, `stats` measures, `report` draws.
Everything here is pure (no cluster, no clock, no I/O frameworks): the CLI reads the files and
hands their text in. See docs/design/simulate.md.
"""

from queuectl.sim.config import SimConfig, SimInputError, load_config
from queuectl.sim.engine import SimOptions, simulate
from queuectl.sim.generate import GenerateOptions, generate_trace
from queuectl.sim.nodes import parse_nodes
from queuectl.sim.trace import Job, parse_trace

__all__ = [
    "GenerateOptions",
    "Job",
    "SimConfig",
    "SimInputError",
    "SimOptions",
    "generate_trace",
    "load_config",
    "parse_nodes",
    "parse_trace",
    "simulate",
]
