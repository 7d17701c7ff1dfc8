"""Every Prometheus metric of queuectl, defined once, one registry per process kind.

Each process serves only its own registry (`AGENT_REGISTRY` for `queuectl agent`,
`CONTROLLER_REGISTRY` for the controller), so a controller scrape never shows empty GPU series.
Names follow Prometheus conventions (`_total` counters, base units, `_ratio` for 0..1).
"""

from queuectl.metrics.agent import *  # noqa: F403
from queuectl.metrics.controller import *  # noqa: F403
from queuectl.metrics.held_gpus import *  # noqa: F403
