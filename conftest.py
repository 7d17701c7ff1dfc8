"""Repo-wide pytest setup: the real local control plane fixtures (queuectl.testenv)."""

pytest_plugins = ["queuectl.testenv.pytest_plugin"]
