"""Run one command as a child process and measure it: wall time, CPU time, peak memory.

Peak memory is taken two ways: ``ru_maxrss`` from ``wait4`` (the largest resident set of the
child or any descendant it waited for: exact, but per process), and the sum of resident sets
over the whole process tree sampled every 10 ms from ``/proc`` (what a process pool really
holds at once; can miss a peak shorter than the interval). Linux only.
"""

from __future__ import annotations

import os
import subprocess
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

SAMPLE_INTERVAL = 0.01  # seconds between /proc samples of the process tree


@dataclass(frozen=True)
class Measurement:
    """One run of one command."""

    wall_seconds: float
    cpu_seconds: float  # user + system, child and its waited-for descendants
    max_rss_mb: float  # ru_maxrss: largest single process
    tree_rss_mb: float  # sampled peak of the sum over the process tree
    other_cpus: float  # CPUs kept busy by other processes meanwhile (0 = quiet machine)
    returncode: int
    stdout: str
    stderr_tail: str


def busy_cpu_seconds() -> float:
    """CPU time spent non-idle by the whole machine since boot, from ``/proc/stat``."""
    try:
        fields = Path("/proc/stat").read_text().splitlines()[0].split()[1:9]
    except (OSError, IndexError):
        return 0.0
    user, nice, system, _idle, _iowait, irq, softirq, steal = (int(f) for f in fields)
    return (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")


def _children(pid: int) -> list[int]:
    found: list[int] = []
    try:
        for task in os.listdir(f"/proc/{pid}/task"):
            text = Path(f"/proc/{pid}/task/{task}/children").read_text()
            found += [int(child) for child in text.split()]
    except OSError:
        pass
    return found


def _rss_kb(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return 0


def tree_rss_kb(root: int) -> int:
    """Sum of VmRSS over ``root`` and all its descendants, in kB."""
    total, pending = 0, [root]
    while pending:
        pid = pending.pop()
        total += _rss_kb(pid)
        pending += _children(pid)
    return total


class _TreeSampler(threading.Thread):
    """Samples the process tree's total RSS until stopped; keeps the peak."""

    def __init__(self, root: int) -> None:
        super().__init__(daemon=True)
        self.root = root
        self.peak_kb = 0
        self._stop_event = threading.Event()

    def run(self) -> None:
        while not self._stop_event.is_set():
            self.peak_kb = max(self.peak_kb, tree_rss_kb(self.root))
            self._stop_event.wait(SAMPLE_INTERVAL)

    def stop(self) -> None:
        self._stop_event.set()
        self.join()


def run_measured(
    command: Sequence[str], env: Mapping[str, str], cwd: Path, stdout_path: Path, timeout: float
) -> Measurement:
    """Run ``command`` to completion (killed after ``timeout`` seconds) and measure it."""
    with open(stdout_path, "wb") as out, open(stdout_path.with_suffix(".err"), "wb") as err:
        busy_before = busy_cpu_seconds()
        started = time.perf_counter()
        child = subprocess.Popen(list(command), stdout=out, stderr=err, env=dict(env), cwd=cwd)
        sampler = _TreeSampler(child.pid)
        sampler.start()
        timer = threading.Timer(timeout, child.kill)
        timer.start()
        try:
            _, status, usage = os.wait4(child.pid, 0)
        finally:
            timer.cancel()
        wall = time.perf_counter() - started
        busy = busy_cpu_seconds() - busy_before
        sampler.stop()
        child.returncode = os.waitstatus_to_exitcode(status)
    cpu = usage.ru_utime + usage.ru_stime
    stderr = stdout_path.with_suffix(".err").read_text(errors="replace")
    return Measurement(
        wall_seconds=wall,
        cpu_seconds=cpu,
        max_rss_mb=usage.ru_maxrss / 1024,
        tree_rss_mb=max(sampler.peak_kb, usage.ru_maxrss) / 1024,
        other_cpus=max(0.0, (busy - cpu) / wall) if wall > 0 else 0.0,
        returncode=child.returncode,
        stdout=stdout_path.read_text(errors="replace"),
        stderr_tail="\n".join(stderr.strip().splitlines()[-5:]),
    )
