"""CustomResourceDefinitions generated from queuectl.api; regenerate with `python -m queuectl.crds`.

``load()`` gives the committed CRDs (in install order) to whoever installs them.
"""

from queuectl.crds.render import CRD_DIR, crd, drifted, load, render, write

__all__ = ["CRD_DIR", "crd", "drifted", "load", "render", "write"]
