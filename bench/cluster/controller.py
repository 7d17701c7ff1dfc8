"""The controller under test, as its own process (`queuectl controller`), so /proc can say what
it cost. Webhooks are not registered: Workloads go through none, and a configuration left
pointing at a stopped process would break the cluster for whoever uses it next; the runner's
probe calls the webhook server directly instead (probe.py).

It runs with leader election, as deployed, in a namespace of its own (its Lease and certificate
Secret), so the runner can watch its Lease and no other controller on a shared cluster holds
that Lease or shares its CA.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Final

from queuectl.api import names
from queuectl.testenv.controllerargs import controller_args
from queuectl.testenv.ports import free_ports


class ControllerProcess:
    LEASE: Final = "queuectl-controller"
    """The Lease name the controller's elector uses (controller/leader.py)."""

    def __init__(
        self,
        kubeconfig: str,
        log_path: Path,
        profile_to: Path | None = None,
        *,
        namespace: str = names.SYSTEM_NAMESPACE,
        cert_dir: Path | None = None,
    ) -> None:
        self.kubeconfig = kubeconfig
        self.log_path = log_path
        self.profile_to = profile_to
        self.namespace = namespace
        self._own_cert_dir = cert_dir is None
        self.cert_dir = cert_dir or Path(tempfile.mkdtemp(prefix="bench-controller-certs-"))
        self.proc: subprocess.Popen[bytes] | None = None
        self.webhook_port = 0
        self.health_port = 0
        self.metrics_port = 0

    @property
    def pid(self) -> int | None:
        return None if self.proc is None else self.proc.pid

    def start(self, timeout: float = 90.0) -> None:
        self.webhook_port, self.health_port, self.metrics_port = free_ports(3)
        argv = [sys.executable]
        if self.profile_to is not None:
            argv += ["-m", "pyinstrument", "-r", "pyisession", "-o", str(self.profile_to)]
        argv += controller_args(
            self.kubeconfig,
            webhook_port=self.webhook_port,
            health_port=self.health_port,
            metrics_port=self.metrics_port,
            extra=[
                "--no-register-webhooks", "--install-crds", "--no-impersonate",
                "--leader-elect", "--namespace", self.namespace, "--cert-dir", str(self.cert_dir),
                "--log-level", "warning",
            ],
        )  # fmt: skip
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        log = self.log_path.open("wb")
        self.proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=os.environ)
        log.close()
        deadline = time.monotonic() + timeout
        url = f"http://127.0.0.1:{self.health_port}/readyz"
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"controller exited ({self.proc.returncode}): {self.tail()}")
            try:
                with urllib.request.urlopen(url, timeout=2) as resp:
                    if resp.status == 200:
                        return
            except OSError:
                pass
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"controller not ready in {timeout:.0f}s: {self.tail()}")
            time.sleep(0.2)

    @property
    def webhook_url(self) -> str:
        return f"https://127.0.0.1:{self.webhook_port}"

    @property
    def ca_file(self) -> Path:
        """The CA bundle the controller writes next to its serving certificate."""
        return self.cert_dir / "ca.crt"

    def render_profile(self) -> Path | None:
        """The profile as a text tree (the .pyisession file stays for `pyinstrument --load`)."""
        if self.profile_to is None or not self.profile_to.exists():
            return None
        from pyinstrument.renderers import ConsoleRenderer
        from pyinstrument.session import Session

        text = ConsoleRenderer(
            unicode=False, color=False, time="percent_of_total",
            processor_options={"filter_threshold": 0.005},
        ).render(Session.load(str(self.profile_to)))  # fmt: skip
        out = self.profile_to.with_suffix(".txt")
        out.write_text(text)
        return out

    def metrics(self) -> str:
        url = f"http://127.0.0.1:{self.metrics_port}/metrics"
        with urllib.request.urlopen(url, timeout=10) as resp:
            body: bytes = resp.read()
        return body.decode()

    def tail(self, lines: int = 20) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def stop(self, timeout: float = 30.0) -> None:
        """SIGINT (the controller shuts down cleanly and a profiler writes its report)."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self._own_cert_dir:
            shutil.rmtree(self.cert_dir, ignore_errors=True)
