"""Where gradcheck's time goes: each stage of the pipeline timed in process on one dataset.

    python bench/stages.py bench/data/tensor-160MB [--repeats 3] [--profile FILE]

Times, on the run's files in the page cache: the bare parse loop (reference), framing alone
(``framing.iter_frames``), framing + decoding (``reader.read_file``), + the streaming reduction
(``series.reduce_records``), the whole analysis (``pipeline.analyze``: + merge and verdicts), and
the JSON report. Each line is the best of ``--repeats`` and includes the stages above it; the
differences are what each stage costs. ``--profile`` writes a cProfile of ``pipeline.analyze``.
Uses gradcheck's internals on purpose: it is a tool for whoever works on the hot path.
"""

from __future__ import annotations

import argparse
import cProfile
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

if __package__ in (None, ""):  # run as a script: python bench/stages.py
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import readers  # noqa: E402


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
    """The cumulative stages, as zero-argument callables."""
    from gradcheck.framing import iter_frames
    from gradcheck.pipeline import analyze
    from gradcheck.reader import read_file
    from gradcheck.report import formatter_for
    from gradcheck.series import reduce_records
    from gradcheck.storage import open_binary

    files = readers.event_files(directory)

    def frames() -> None:
        for file in files:
            with open_binary(file) as stream:
                _drain(iter_frames(stream))

    def records() -> None:
        for file in files:
            _drain(read_file(file, directory))

    def report() -> None:
        formatter_for("json").format(analyze([directory]))

    return [
        ("bare parse loop (reference)", lambda: readers.bare(directory)),
        ("framing + CRCs", frames),
        ("+ decoding to records", records),
        ("+ streaming reduction", lambda: [reduce_records(read_file(f, directory)) for f in files]),
        ("+ merge and verdicts", lambda: analyze([directory])),
        ("+ JSON report", report),
    ]


def main(argv: Sequence[str] | None = None) -> int:
    """Print each stage's best time, the cost it adds, and its ratio to the bare loop."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("directory", help="a run directory, e.g. bench/data/tensor-160MB")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--profile", type=Path, help="write a cProfile of the analysis here")
    args = parser.parse_args(argv)
    stages = stage_functions(args.directory)
    previous = 0.0
    bare = None
    for name, function in stages:
        seconds = _best(function, args.repeats)
        bare = seconds if bare is None else bare
        added = seconds - previous if previous else seconds
        print(f"{name:<30} {seconds:8.3f} s  (+{added:7.3f} s)  {seconds / bare:6.2f}x bare")
        previous = seconds if name != stages[0][0] else 0.0
    if args.profile:
        from gradcheck.pipeline import analyze

        cProfile.runctx(
            "analyze([d])", {"analyze": analyze}, {"d": args.directory}, str(args.profile)
        )
        print(f"profile written to {args.profile} (python -m pstats {args.profile})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
