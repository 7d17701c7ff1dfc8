"""Scheduler benchmark on the real control plane (issue 6): `python -m bench run SCENARIO`.

scenario (files) -> objects (dicts) -> setup (queue tree) -> load (streams, watch, finishes)
-> record (figures) -> report (JSON, markdown, plot); cli ties them to testenv and the
controller process.
"""
