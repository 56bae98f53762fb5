"""Where gradcheck's time goes: each stage of the pipeline timed in process on one dataset.

    python bench/stages.py bench/data/tensor-160MB [--repeats 3] [--profile FILE]

Times, on the run's files in the page cache, each line the best of ``--repeats``: the bare
parse loop (the reference the ratios are to); the pure-Python reference engine's records
(``reader.read_file``: framing, CRCs, decoding), for scale; then the C engine in this process,
cumulatively: reading alone (framing, CRCs, fields; the per-histogram statistics skipped),
+ statistics and series (``fastpath.reduce_file_range``), + merge and verdicts
(``pipeline.analyze`` with ``jobs=1``); then the same analysis with the default jobs (two
processes on a big file or several), and + the JSON report. ``--profile`` writes a cProfile
of ``pipeline.analyze``.
Uses gradcheck's internals on purpose: it is a tool for whoever works on the hot path.
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import numpy as np

if __package__ in (None, ""):  # run as a script: python bench/stages.py
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import readers  # noqa: E402
from gradcheck.model import STAT_NAMES  # noqa: E402


def _best(function: Callable[[], object], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        function()
        times.append(time.perf_counter() - started)
    return min(times)


def _drain(items: object) -> None:
    for _ in items:  # type: ignore[attr-defined]
        pass


def stage_functions(directory: str) -> list[tuple[str, Callable[[], object]]]:
    """The stages, as zero-argument callables: the reference, then the C engine's cumulative
    stages in one process, then the default (two processes) and the report."""
    from gradcheck.engine import fastpath
    from gradcheck.events.reader import read_file
    from gradcheck.events.steps import StepWindow
    from gradcheck.pipeline import analyze
    from gradcheck.report import formatter_for

    files = readers.event_files(directory)

    def records() -> None:
        for file in files:
            _drain(read_file(file, directory))

    def scanned() -> None:  # the C scan with statistics skipped (rows left unreduced)
        with _no_statistics():
            for file in files:
                fastpath.reduce_file_range(file, directory, StepWindow())

    def reduced() -> None:
        for file in files:
            fastpath.reduce_file_range(file, directory, StepWindow())

    def report() -> None:
        formatter_for("json").format(analyze([directory]))

    return [
        ("bare parse loop", lambda: readers.bare(directory)),
        ("reference engine: records", records),
        ("C engine: framing, CRC, fields", scanned),
        ("+ statistics, series", reduced),
        ("+ merge, verdicts (--jobs 1)", lambda: analyze([directory], jobs=1)),
        ("the same, default --jobs", lambda: analyze([directory])),
        ("+ JSON report", report),
    ]


@contextlib.contextmanager
def _no_statistics() -> Iterator[None]:
    """The C engine's reading alone: the per-histogram statistics call does nothing."""
    from gradcheck.engine import fastpath

    original = fastpath._reduced

    def skipped(c: object, at: np.ndarray, sizes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return np.zeros((at.size, len(STAT_NAMES)), np.float32), np.zeros(at.size, np.uint64)

    fastpath._reduced = skipped  # type: ignore[assignment]
    try:
        yield
    finally:
        fastpath._reduced = original  # type: ignore[assignment]


def main(argv: Sequence[str] | None = None) -> int:
    """Print each stage's best time, the cost it adds, and its ratio to the bare loop."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("directory", help="a run directory, e.g. bench/data/tensor-160MB")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--profile", type=Path, help="write a cProfile of the analysis here")
    args = parser.parse_args(argv)
    from gradcheck.cli import collect_less_often

    collect_less_often()  # the collector as gradcheck's entry point sets it
    bare = None
    for name, function in stage_functions(args.directory):
        seconds = _best(function, args.repeats)
        bare = seconds if bare is None else bare
        print(f"{name:<32} {seconds:8.3f} s  {seconds / bare:6.2f}x bare")
    if args.profile:
        from gradcheck.pipeline import analyze

        cProfile.runctx(
            "analyze([d])", {"analyze": analyze}, {"d": args.directory}, str(args.profile)
        )
        print(f"profile written to {args.profile} (python -m pstats {args.profile})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
