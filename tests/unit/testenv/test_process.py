"""The supervisor stops exactly the processes it started, even from another process."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from queuectl.testenv.errors import ComponentFailed, PortInUse
from queuectl.testenv.process import ProcessRecord, Supervisor, process_start_time
from queuectl.testenv.readiness import wait_ready

SLEEP = [sys.executable, "-c", "import time; time.sleep(300)"]


def test_down_stops_every_recorded_process_and_nothing_else(tmp_path: Path) -> None:
    bystander = subprocess.Popen(SLEEP)
    try:
        sup = Supervisor(tmp_path)
        ours = [sup.spawn(f"p{i}", SLEEP) for i in range(3)]
        assert all(r.alive() for r in ours)

        # Another process (e.g. `queuectl dev down`) reads the record and stops them.
        stopped = Supervisor(tmp_path).stop_all(timeout=5)

        assert sorted(stopped) == ["p0", "p1", "p2"]
        assert not any(r.alive() for r in ours)
        assert bystander.poll() is None, "a process we did not start was touched"
        assert Supervisor(tmp_path).records == []
    finally:
        bystander.kill()
        bystander.wait()


def test_a_recycled_pid_is_never_signalled(tmp_path: Path) -> None:
    bystander = subprocess.Popen(SLEEP, start_new_session=True)
    try:
        # A record whose pid now belongs to someone else: same pid, other start time.
        stale = ProcessRecord("old", bystander.pid, "1", SLEEP, str(tmp_path / "old.log"))
        assert not stale.alive()
        sup = Supervisor(tmp_path)
        sup._records.append(stale)
        assert sup.stop_all(timeout=1) == []
        assert bystander.poll() is None
    finally:
        bystander.kill()
        bystander.wait()


def test_start_time_identifies_a_live_process() -> None:
    child = subprocess.Popen(SLEEP)
    try:
        assert process_start_time(child.pid) is not None
    finally:
        child.kill()
        child.wait()
    assert process_start_time(child.pid) is None


def test_a_name_is_recorded_once(tmp_path: Path) -> None:
    sup = Supervisor(tmp_path)
    sup.spawn("x", SLEEP)
    try:
        with pytest.raises(ValueError, match="already recorded"):
            sup.spawn("x", SLEEP)
    finally:
        sup.stop_all()


@pytest.mark.parametrize(
    ("script", "error", "says"),
    [
        ("print('boom: bad flag'); raise SystemExit(1)", ComponentFailed, "exited during start-up"),
        (
            "print('listen tcp 127.0.0.1:6443: bind: address already in use'); raise SystemExit(1)",
            PortInUse,
            "could not bind its port",
        ),
    ],
)
def test_a_component_that_dies_fails_fast_with_its_log(
    tmp_path: Path, script: str, error: type[Exception], says: str
) -> None:
    sup = Supervisor(tmp_path)
    record = sup.spawn("comp", [sys.executable, "-c", script])
    with pytest.raises(error) as caught:
        wait_ready(record, lambda: False, timeout=30)
    assert says in str(caught.value)
    assert "comp.log" in str(caught.value)
    sup.stop_all()


def test_a_component_that_never_gets_ready_times_out_with_its_log(tmp_path: Path) -> None:
    sup = Supervisor(tmp_path)
    record = sup.spawn(
        "slow",
        [sys.executable, "-c", "print('warming up', flush=True); import time; time.sleep(60)"],
    )
    try:
        with pytest.raises(ComponentFailed, match="not ready after") as caught:
            wait_ready(record, lambda: False, timeout=0.5)
        assert "warming up" in str(caught.value)
    finally:
        sup.stop_all()


def test_restart_replaces_one_process_in_place(tmp_path: Path) -> None:
    sup = Supervisor(tmp_path)
    first, middle, last = (sup.spawn(n, SLEEP) for n in ("a", "b", "c"))
    try:
        again = sup.restart("b")
        assert not middle.alive() and again.alive() and again.pid != middle.pid
        assert again.argv == middle.argv
        assert [r.name for r in Supervisor(tmp_path).records] == ["a", "b", "c"]
        crashed = sup.restart("b", kill=True)
        assert not again.alive() and crashed.alive()
        assert first.alive() and last.alive()
        with pytest.raises(ValueError, match="no process named 'zz'"):
            sup.restart("zz")
    finally:
        sup.stop_all(timeout=5)


def test_one_process_is_stopped_and_started_again_by_its_name(tmp_path: Path) -> None:
    """A real node's kubelet is stopped to fail its node, then started again."""
    sup = Supervisor(tmp_path)
    kubelet, other = sup.spawn("kubelet", SLEEP), sup.spawn("other", SLEEP)
    try:
        assert sup.stop("kubelet", timeout=5) is True
        assert not kubelet.alive() and other.alive()
        assert sup.stop("kubelet", timeout=5) is False  # already stopped
        again = sup.restart("kubelet")
        assert again.alive() and again.pid != kubelet.pid
        with pytest.raises(ValueError, match="no process named 'nobody'"):
            sup.stop("nobody")
    finally:
        sup.stop_all(timeout=5)


def test_a_process_that_exited_on_its_own_can_be_started_again_under_its_name(
    tmp_path: Path,
) -> None:
    """An operator that exits (mpi-operator losing its leader Lease while the API server
    restarts) is forgotten and started again; a running one is never forgotten."""
    sup = Supervisor(tmp_path)
    gone = sup.spawn("operator-x", [sys.executable, "-c", "pass"])
    sup._children[gone.pid].wait(timeout=10)
    assert not gone.alive()
    with pytest.raises(ValueError, match="already recorded"):
        sup.spawn("operator-x", [sys.executable, "-c", "pass"])
    sup.forget("operator-x")
    again = sup.spawn("operator-x", [sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        with pytest.raises(ValueError, match="still running"):
            sup.forget("operator-x")
        assert [r.pid for r in Supervisor(tmp_path).records] == [again.pid]
    finally:
        sup.stop_all(timeout=5)
