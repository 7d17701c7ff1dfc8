"""CPU seconds and peak memory of a process, from /proc (Linux), without psutil.

Peak RSS is the kernel's high-water mark (VmHWM), so no sample can miss a spike; CPU is user +
system time of the process (its threads included), read before and after the run.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

_TICKS = os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True)
class ProcSample:
    cpu_s: float
    rss_mb: float
    peak_rss_mb: float


def sample(pid: int) -> ProcSample:
    with open(f"/proc/{pid}/stat") as f:
        stat = f.read()
    fields = stat[stat.rindex(")") + 2 :].split()
    cpu = (int(fields[11]) + int(fields[12])) / _TICKS  # utime, stime (fields 14, 15)
    rss = peak = 0.0
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                rss = int(line.split()[1]) / 1024
            elif line.startswith("VmHWM:"):
                peak = int(line.split()[1]) / 1024
    return ProcSample(cpu, rss, peak)


def try_sample(pid: int | None) -> ProcSample | None:
    if pid is None:
        return None
    try:
        return sample(pid)
    except (OSError, ValueError, IndexError):
        return None
