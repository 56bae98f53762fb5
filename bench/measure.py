"""Run one command as a child process and measure it: wall time, CPU time, peak memory.

Peak memory comes from ``/proc``, sampled every 10 ms over the child and its descendants:
``VmHWM`` (each process's own high-water mark, exact whenever the process lived long enough to
be sampled once) and the sum of ``VmRSS`` over the tree (what a process pool holds at once; a
lower bound, as a peak shorter than the interval can be missed; but pages a forked child still
shares with its parent count in both), plus the in-memory files (``memfd``) open in the tree,
which no ``VmRSS`` counts until they are mapped (and then twice). ``Pss`` would count shared
pages once, but reading ``smaps_rollup`` walks the process's page tables: sampled every 10 ms
it kept ~0.14 CPU busy (against ~0.05) and slowed the two-process runs it measured (4 runs of
40 MB: 1.14x over ``--jobs 1`` against 1.44x). ``ru_maxrss`` from ``wait4`` is not used:
Linux carries the forking parent's high-water mark across ``exec``, so it reports at least the
benchmark driver's own size. Linux only.
"""

from __future__ import annotations

import os
import subprocess
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

SAMPLE_INTERVAL = 0.01  # seconds between /proc samples of the process tree


@dataclass(frozen=True)
class Measurement:
    """One run of one command."""

    wall_seconds: float
    cpu_seconds: float  # user + system, child and its waited-for descendants
    max_rss_mb: float  # largest VmHWM of any process in the tree
    tree_rss_mb: float  # peak of the summed VmRSS (and memfds) over the tree, >= max_rss_mb
    other_cpus: float  # CPUs kept busy by other processes meanwhile (0 = quiet machine)
    returncode: int
    stdout: str
    stderr_tail: str
    tree_pss_mb: float | None = None
    """Peak of the summed ``Pss`` (and memfds) over the tree: a page the forked workers share
    with the command is counted once in all, where the summed VmRSS counts it once a process
    (None where the kernel gives no ``smaps_rollup``)."""


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


def memory_kb(pid: int) -> tuple[int, int]:
    """``(VmRSS, VmHWM)`` of ``pid`` in kB; zeros when it is gone."""
    rss = peak = 0
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                rss = int(line.split()[1])
            elif line.startswith("VmHWM:"):
                peak = int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return rss, peak


def pss_kb(pid: int) -> int | None:
    """``pid``'s proportional set size in kB (``/proc/PID/smaps_rollup``: a page that n
    processes map counts 1/n in each); None when the kernel gives none or ``pid`` is gone."""
    try:
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            if line.startswith("Pss:"):
                return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        return None
    return None


def memory_files_kb(pids: Sequence[int]) -> int:
    """Size in kB of the in-memory files (``memfd``) open in ``pids``, each counted once:
    memory that no process's ``VmRSS`` holds until it maps it (gradcheck's forked child
    writes its results to one)."""
    sizes: dict[int, int] = {}
    for pid in pids:
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        for fd in fds:
            try:
                if os.readlink(f"/proc/{pid}/fd/{fd}").startswith("/memfd:"):
                    info = os.stat(f"/proc/{pid}/fd/{fd}")
                    sizes[info.st_ino] = info.st_size
            except OSError:
                continue
    return sum(sizes.values()) // 1024


def _cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


def tree_pids(root: int) -> list[int]:
    """``root`` and all its descendants."""
    found, pending = [], [root]
    while pending:
        pid = pending.pop()
        found.append(pid)
        pending += _children(pid)
    return found


class _TreeSampler(threading.Thread):
    """Samples the process tree's memory until stopped; keeps the peaks."""

    def __init__(self, root: int, command: Sequence[str]) -> None:
        super().__init__(daemon=True)
        self.root = root
        self.cmdline = ("\0".join(command) + "\0").encode()
        self.started = False  # the root has exec'd our command (before, it is our own image)
        self.tree_peak_kb = 0
        # None where the kernel gives no Pss (Linux before 4.14, not Linux)
        self.tree_pss_peak_kb: int | None = 0 if Path("/proc/self/smaps_rollup").exists() else None
        self.process_peaks_kb: dict[int, int] = {}
        self._stop_event = threading.Event()

    def run(self) -> None:
        while not self._stop_event.is_set():
            if not self.started:
                self.started = _cmdline(self.root) == self.cmdline
                if not self.started:
                    self._stop_event.wait(0.001)
                    continue
            pids = tree_pids(self.root)
            files = memory_files_kb(pids)
            total = proportional = files
            for pid in pids:
                rss, peak = memory_kb(pid)
                total += rss
                self.process_peaks_kb[pid] = max(peak, self.process_peaks_kb.get(pid, 0))
                if self.tree_pss_peak_kb is not None:
                    proportional += pss_kb(pid) or 0  # None: gone since it was listed
            self.tree_peak_kb = max(self.tree_peak_kb, total)
            if self.tree_pss_peak_kb is not None:
                self.tree_pss_peak_kb = max(self.tree_pss_peak_kb, proportional)
            self._stop_event.wait(SAMPLE_INTERVAL)

    def stop(self) -> None:
        self._stop_event.set()
        self.join()


class _ReadyWatcher(threading.Thread):
    """Copies a server's stderr to a file and notes when the line containing ``ready``
    appears; then closes the server's stdin (a server run with ``--die-after-stdin`` exits)."""

    def __init__(self, child: subprocess.Popen[bytes], ready: str, copy: BinaryIO) -> None:
        super().__init__(daemon=True)
        self.child, self.ready, self.copy = child, ready.encode(), copy
        self.seen_at: float | None = None

    def run(self) -> None:
        assert self.child.stderr is not None and self.child.stdin is not None
        for line in self.child.stderr:
            if self.seen_at is None and self.ready in line:
                self.seen_at = time.perf_counter()
                self.child.stdin.close()
            self.copy.write(line)


def run_measured(
    command: Sequence[str],
    env: Mapping[str, str],
    cwd: Path,
    stdout_path: Path,
    timeout: float,
    ready: str | None = None,
) -> Measurement:
    """Run ``command`` to completion (killed after ``timeout`` seconds) and measure it.

    With ``ready``, the command is a server that never ends by itself (run with
    ``--die-after-stdin``): its wall time is the time until a line of its stderr contains
    ``ready``, when its stdin is closed; a server that ends without that line reports exit
    status -1 (its CPU time and peak memory include its shutdown, a few milliseconds)."""
    with open(stdout_path, "wb") as out, open(stdout_path.with_suffix(".err"), "wb") as err:
        busy_before = busy_cpu_seconds()
        started = time.perf_counter()
        pipe = subprocess.PIPE if ready is not None else None
        child = subprocess.Popen(
            list(command),
            stdin=pipe,
            stdout=out,
            stderr=pipe or err,
            env=dict(env),
            cwd=cwd,
        )
        watcher = _ReadyWatcher(child, ready, err) if ready is not None else None
        if watcher is not None:
            watcher.start()
        sampler = _TreeSampler(child.pid, command)
        sampler.start()
        timer = threading.Timer(timeout, child.kill)
        timer.start()
        try:
            _, status, usage = os.wait4(child.pid, 0)
        finally:
            timer.cancel()
        ended = lifetime_end = time.perf_counter()
        busy = busy_cpu_seconds() - busy_before
        sampler.stop()
        child.returncode = os.waitstatus_to_exitcode(status)
        if watcher is not None:
            watcher.join()
            ended = watcher.seen_at or ended
            child.returncode = 0 if watcher.seen_at is not None else -1
            if child.stdin is not None and not child.stdin.closed:
                child.stdin.close()
        wall, lifetime = ended - started, lifetime_end - started
    cpu = usage.ru_utime + usage.ru_stime
    # a child too short-lived to be sampled falls back to ru_maxrss (an overestimate, see above)
    largest = max(sampler.process_peaks_kb.values(), default=0) or usage.ru_maxrss
    stderr = stdout_path.with_suffix(".err").read_text(errors="replace")
    return Measurement(
        wall_seconds=wall,
        cpu_seconds=cpu,
        max_rss_mb=largest / 1024,
        tree_rss_mb=max(sampler.tree_peak_kb, largest) / 1024,
        tree_pss_mb=None if not sampler.tree_pss_peak_kb else sampler.tree_pss_peak_kb / 1024,
        other_cpus=max(0.0, (busy - cpu) / lifetime) if lifetime > 0 else 0.0,
        returncode=child.returncode,
        stdout=stdout_path.read_text(errors="replace"),
        stderr_tail="\n".join(stderr.strip().splitlines()[-5:]),
    )
