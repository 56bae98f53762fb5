"""How much faster this machine runs two of gradcheck's readings at once than one after the other.

The 2-core target (``--jobs 2`` at least 1.6x ``--jobs 1`` on several files) can only be met if
the two CPUs really run two processes at full speed. On a VM they may not: its vCPUs may be
hyperthreads of one host core, or share a memory bus with other guests. This measures that
ceiling with gradcheck's own work: ``gradcheck analyze --jobs 1`` on two files of a run, each
its own process, run one after the other and then at once, alternating, median of ``repeats``.
The ratio (one after the other / at once) is what ``--jobs 2`` could at most gain there before
any serial work (start-up, merge, verdicts); 2.0 on two free cores.

    python bench/ceiling.py bench/data/tensor-4x250MB [--repeats 5]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

FLAGS = ("--format", "json", "--fail-on", "none", "--no-progress", "--jobs", "1")


@dataclass(frozen=True)
class Ceiling:
    """Medians, in seconds, and their ratio."""

    files: tuple[str, ...]
    one_after_the_other: float
    at_once: float
    repeats: int

    @property
    def ratio(self) -> float:
        return self.one_after_the_other / self.at_once


def _command(python: str, file: str) -> list[str]:
    return [python, "-m", "gradcheck", "analyze", file, *FLAGS]


def _timed(commands: Sequence[list[str]], env: Mapping[str, str], cwd: Path) -> float:
    """Wall seconds until every command, all started at once, has ended (each must succeed)."""
    started = time.perf_counter()
    processes = [
        subprocess.Popen(command, env=dict(env), cwd=cwd, stdout=subprocess.DEVNULL)
        for command in commands
    ]
    codes = [process.wait() for process in processes]
    seconds = time.perf_counter() - started
    if any(codes):
        raise RuntimeError(f"gradcheck exited with {codes} on {commands}")
    return seconds


def measure(
    files: Sequence[str], env: Mapping[str, str], cwd: Path, repeats: int, python: str
) -> Ceiling:
    """The two first of ``files`` read one after the other, then at once (order alternating)."""
    first, second = (_command(python, file) for file in files[:2])
    _timed([first, second], env, cwd)  # warm-up: bytecode, page cache
    serial, parallel = [], []
    for repeat in range(repeats):
        for kind in ("serial", "parallel") if repeat % 2 == 0 else ("parallel", "serial"):
            if kind == "serial":
                serial.append(_timed([first], env, cwd) + _timed([second], env, cwd))
            else:
                parallel.append(_timed([first, second], env, cwd))
    return Ceiling(
        tuple(files[:2]),
        round(statistics.median(serial), 3),
        round(statistics.median(parallel), 3),
        repeats,
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("directory", type=Path, help="a run with two files or more")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args(argv)
    files = sorted(str(p) for p in args.directory.iterdir() if "tfevents" in p.name)
    if len(files) < 2:
        parser.error(f"{args.directory} has fewer than two event files")
    repo = Path(__file__).resolve().parents[1]
    sys.path.insert(0, str(repo))
    from bench.gen import DATA_DIR
    from bench.run import child_environment

    ceiling = measure(files, child_environment(DATA_DIR), repo, args.repeats, sys.executable)
    print(
        f"two files, gradcheck --jobs 1 each: one after the other {ceiling.one_after_the_other:.2f}"
        f" s, at once {ceiling.at_once:.2f} s: {ceiling.ratio:.2f}x (median of {ceiling.repeats})"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
