"""Start, record and stop the processes of one environment, and only those.

Every process runs in its own session (so it outlives `queuectl dev up` and can be signalled as
a process group) with stdout and stderr in `<work_dir>/logs/<name>.log`. Each start is recorded
in `<work_dir>/processes.json` with its pid and kernel start time: `stop` signals a pid only if
its start time still matches, so a recycled pid that now belongs to someone else is never touched.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

RECORD_FILE = "processes.json"


def process_start_time(pid: int) -> str | None:
    """The kernel's start time of `pid` (clock ticks since boot), or None if it is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return _start_time_from_ps(pid)
    fields = stat[stat.rindex(")") + 2 :].split()
    if fields[0] == "Z":  # a zombie has finished; it only waits to be reaped
        return None
    return fields[19]  # field 22 of /proc/<pid>/stat; fields[0] is field 3


def _start_time_from_ps(pid: int) -> str | None:
    """Fallback where /proc is absent (macOS)."""
    if not Path("/proc").is_dir():
        try:
            out = subprocess.run(
                ["ps", "-o", "lstart=", "-p", str(pid)], capture_output=True, text=True, timeout=10
            ).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            return None
        return out or None
    return None


@dataclass(frozen=True)
class ProcessRecord:
    name: str
    pid: int
    start_time: str
    argv: list[str]
    log: str

    def alive(self) -> bool:
        """True while the very process we started is running (not a recycled pid)."""
        return process_start_time(self.pid) == self.start_time

    def log_tail(self, lines: int = 30) -> str:
        try:
            text = Path(self.log).read_text(errors="replace").splitlines()
        except OSError:
            return "(no log)"
        return "\n".join(f"  | {line}" for line in text[-lines:])


class Supervisor:
    """The processes of one environment, persisted so another process can stop them."""

    def __init__(self, work_dir: Path) -> None:
        self.work_dir = work_dir
        self.log_dir = work_dir / "logs"
        self._records: list[ProcessRecord] = []
        self._children: dict[int, subprocess.Popen[bytes]] = {}
        path = work_dir / RECORD_FILE
        if path.exists():
            self._records = [ProcessRecord(**r) for r in json.loads(path.read_text())]

    @property
    def records(self) -> list[ProcessRecord]:
        return list(self._records)

    def get(self, name: str) -> ProcessRecord | None:
        return next((r for r in self._records if r.name == name), None)

    def _save(self) -> None:
        path = self.work_dir / RECORD_FILE
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps([asdict(r) for r in self._records], indent=2))
        tmp.replace(path)

    def spawn(
        self,
        name: str,
        argv: Sequence[str],
        *,
        env: Mapping[str, str] | None = None,
        cwd: Path | None = None,
    ) -> ProcessRecord:
        """Start `argv` detached in its own session, logging to logs/<name>.log."""
        if self.get(name) is not None:
            raise ValueError(f"a process named {name!r} is already recorded")
        self.log_dir.mkdir(parents=True, exist_ok=True)
        log = self.log_dir / f"{name}.log"
        with log.open("ab") as sink:
            child = subprocess.Popen(
                list(argv),
                stdin=subprocess.DEVNULL,
                stdout=sink,
                stderr=subprocess.STDOUT,
                cwd=cwd or self.work_dir,
                env=dict(env) if env is not None else None,
                start_new_session=True,
            )
        start = process_start_time(child.pid) or ""
        record = ProcessRecord(name, child.pid, start, list(argv), str(log))
        self._children[child.pid] = child
        self._records.append(record)
        self._save()
        return record

    def restart(self, name: str, *, kill: bool = False, timeout: float = 10.0) -> ProcessRecord:
        """Stop `name` (SIGTERM, or SIGKILL as a crash) and start it again with the same argv.

        The new process keeps the name and its place in the stop order; its log is appended to.
        """
        old = self.get(name)
        if old is None:
            raise ValueError(f"no process named {name!r} is recorded")
        if kill:
            child = self._children.pop(old.pid, None)
            _signal_group(old.pid, signal.SIGKILL)
            if child is not None:
                child.wait(timeout=timeout)
        else:
            self._stop(old, timeout)
        index = self._records.index(old)
        self._records.remove(old)
        new = self.spawn(name, old.argv)
        self._records.remove(new)
        self._records.insert(index, new)
        self._save()
        return new

    def forget(self, name: str) -> None:
        """Drop the record of `name`, a process that is no longer running (it exited on its
        own), so that it can be started again under its name."""
        old = self.get(name)
        if old is None:
            return
        if old.alive():
            raise ValueError(f"{name!r} is still running: stop it first")
        child = self._children.pop(old.pid, None)
        if child is not None:
            child.poll()  # reap it
        self._records.remove(old)
        self._save()

    def stop(self, name: str, timeout: float = 10.0) -> bool:
        """Stop `name` (SIGTERM, then SIGKILL) and keep its record, so `restart` starts it
        again and `stop_all` still knows it; False when it was not running."""
        record = self.get(name)
        if record is None:
            raise ValueError(f"no process named {name!r} is recorded")
        return self._stop(record, timeout)

    def exit_code(self, record: ProcessRecord) -> int | None:
        """The exit code if we started it in this process and it has ended."""
        child = self._children.get(record.pid)
        return child.poll() if child is not None else None

    def stop_all(self, timeout: float = 10.0) -> list[str]:
        """Stop every recorded process, newest first; return the names that were running."""
        if not self._records:
            return []
        stopped = []
        for record in reversed(self._records):
            if self._stop(record, timeout):
                stopped.append(record.name)
        self._records = []
        self._save()
        return stopped

    def _stop(self, record: ProcessRecord, timeout: float) -> bool:
        child = self._children.pop(record.pid, None)
        if not record.alive():
            if child is not None:
                child.poll()
            return False
        _signal_group(record.pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if child is not None:
                child.poll()
            if not record.alive():
                return True
            time.sleep(0.05)
        _signal_group(record.pid, signal.SIGKILL)
        if child is not None:
            child.wait(timeout=5)
        return True


def _signal_group(pid: int, sig: signal.Signals) -> None:
    """Signal the process group the process leads (it was started with its own session)."""
    try:
        os.killpg(pid, sig)
    except ProcessLookupError:
        pass
    except PermissionError:
        os.kill(pid, sig)
