"""Errors of the local control plane, each carrying the fix a user should apply.

A user who runs `queuectl dev up` or the tests should get one clear sentence about what went
wrong and what to do, never a hang or a bare traceback from deep inside subprocess handling.
"""

from __future__ import annotations


class TestEnvError(RuntimeError):
    """Something in the local control plane failed; `fix` says what to do about it."""

    __test__ = False  # not a pytest test class despite the name

    def __init__(self, problem: str, fix: str, detail: str = "") -> None:
        self.problem = problem
        self.fix = fix
        self.detail = detail
        text = f"{problem}\n  fix: {fix}"
        if detail:
            text += "\n" + detail
        super().__init__(text)


class GoToolchainMissing(TestEnvError):
    """No usable Go toolchain to build the control-plane binaries."""


class BuildFailed(TestEnvError):
    """`go build` / `go install` of the control-plane binaries failed."""


class PortInUse(TestEnvError):
    """A port the control plane needs is already taken."""


class ComponentFailed(TestEnvError):
    """A component exited or did not become ready in time."""


class ToolMissing(TestEnvError):
    """A command-line tool the environment relies on (kubectl) is not installed."""
