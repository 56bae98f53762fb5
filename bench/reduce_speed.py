"""Time the C statistics kernel (``_scan.reduce``) alone, in process, on the bench logs.

Reads each log once with the C engine while recording every ``_scan.reduce`` call's arguments,
then replays those calls ``--repeats`` times and prints the best total (CPU time), the
microseconds per histogram, and a digest of the outputs (same digest: same results).

    .venv/bin/python bench/reduce_speed.py bench/data/histo-40MB bench/data/tensor-160MB
"""

from __future__ import annotations

import argparse
import hashlib
import time
from pathlib import Path

import numpy as np

from gradcheck.engine import fastpath  # type: ignore[attr-defined]
from gradcheck.events.steps import StepWindow
from gradcheck.native import _scan  # type: ignore[attr-defined]

Call = tuple[np.ndarray, ...]


def recorded_calls(directory: Path) -> list[Call]:
    """Every ``_scan.reduce`` call made while reading ``directory``'s event files (copies)."""
    calls: list[Call] = []
    original = _scan.reduce

    def recording(*args: np.ndarray) -> None:
        calls.append(tuple(np.array(a, copy=True) for a in args))
        original(*args)

    _scan.reduce = recording
    try:
        for path in sorted(directory.glob("events.out.tfevents.*")):
            fastpath.reduce_file_range(str(path), "run", StepWindow())
    finally:
        _scan.reduce = original
    return calls


def replay(calls: list[Call]) -> tuple[float, str]:
    """CPU seconds of this thread for all calls (other engineers' processes share the cores:
    the CPU time is less disturbed by them than the wall time), and a digest of the
    statistics and fingerprints."""
    digest = hashlib.sha256()
    began = time.thread_time()
    for call in calls:
        _scan.reduce(*call)
    elapsed = time.thread_time() - began
    for call in calls:
        digest.update(call[7].tobytes())
        digest.update(call[8].tobytes())
    return elapsed, digest.hexdigest()[:16]


def main() -> None:
    """Best of ``--repeats`` replays per directory."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("directories", nargs="+", type=Path)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    for directory in args.directories:
        calls = recorded_calls(directory)
        histograms = sum(int(c[1].size) for c in calls)
        best, digest = min(replay(calls) for _ in range(args.repeats))
        print(
            f"{directory.name}: {histograms} histograms, reduce {best * 1e3:.1f} ms "
            f"({best / max(histograms, 1) * 1e6:.2f} us each), digest {digest}"
        )


if __name__ == "__main__":
    main()
