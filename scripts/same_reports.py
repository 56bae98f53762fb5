"""Two checkouts of gradcheck give the same reports, byte for byte, on the same logs.

    python scripts/same_reports.py /work/main /work/wt-x sample_runs tests/data/sweep ...

For a change that must not change what users see (a refactoring): each checkout runs
``python -m gradcheck`` (its own tree on ``PYTHONPATH``, this interpreter) on every log
directory given, ``analyze`` in every format (``--jobs 1`` and the default), ``inspect`` in
both of its formats, and ``compare`` of two runs in every format for each ``--pair A:B``. The
report (stdout), the exit status and stderr must agree to the byte. Prints one line per
difference and a summary; exits 1 when anything differs. Without log directories: the sample
runs, the test data, ``../shared/corpus`` and ``bench/data`` where present. No timing here:
``bench/ab.py`` measures speed.
"""

from __future__ import annotations

import argparse
import compileall
import os
import subprocess
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ANALYZE_FORMATS = ("json", "markdown", "csv", "table", "html", "github", "junit")
INSPECT_FORMATS = ("table", "json")
COMPARE_FORMATS = ("table", "json", "markdown", "html")
JOBS = (("--jobs", "1"), ())
DEFAULT_LOGS = (
    "sample_runs",
    "sample_slow",
    "sample_clipping",
    "sample_pairs",
    "tests/data/runs15",
    "tests/data/sweep",
    "tests/data/writers",
    "../shared/corpus/runs",
    "bench/data",
)
DEFAULT_PAIRS = ("sample_pairs/summed_loss/fit:sample_pairs/summed_loss/loop",)


def commands(logs: Sequence[Path], pairs: Sequence[str]) -> Iterator[list[str]]:
    """Every command line (after ``python -m gradcheck``) that both checkouts run."""
    quiet = ["--no-progress", "--width", "100"]
    for log in logs:
        for jobs in JOBS:
            for name in ANALYZE_FORMATS:
                yield ["analyze", str(log), "--format", name, "--fail-on", "any", *quiet, *jobs]
        for name in INSPECT_FORMATS:
            yield ["inspect", str(log), "--format", name]
    for pair in pairs:
        run_a, _, run_b = pair.partition(":")
        for jobs in JOBS:
            for name in COMPARE_FORMATS:
                yield ["compare", run_a, run_b, "--format", name, *quiet, *jobs]


def run(tree: Path, command: list[str]) -> tuple[int, bytes, bytes]:
    """``python -P -m gradcheck COMMAND`` with ``tree`` first on the path: status, stdout,
    stderr. ``-P``: ``-m`` puts the working directory (this checkout, whose ``gradcheck`` it
    would import for both trees) ahead of ``PYTHONPATH``; without it both checkouts ran this
    one's code."""
    env = {**os.environ, "PYTHONPATH": str(tree.resolve()), "COLUMNS": "100"}
    env.pop("GITHUB_STEP_SUMMARY", None)
    done = subprocess.run(
        [sys.executable, "-P", "-m", "gradcheck", *command], capture_output=True, env=env, cwd=ROOT
    )
    return done.returncode, done.stdout, done.stderr


def first_difference(a: bytes, b: bytes) -> str:
    """Where two outputs part: the byte offset and a few bytes of each."""
    at = next(
        (i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b))
    )
    return f"byte {at} of {len(a)}/{len(b)}: {a[at : at + 40]!r} ~ {b[at : at + 40]!r}"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("a", type=Path, help="checkout A (the reference)")
    parser.add_argument("b", type=Path, help="checkout B")
    parser.add_argument("logs", type=Path, nargs="*", help="log directories (default: see above)")
    parser.add_argument("--pair", action="append", help="RUN_A:RUN_B for compare (repeatable)")
    parser.add_argument("--no-ext", action="store_true", help="GRADCHECK_NO_EXT=1 in both")
    args = parser.parse_args(argv)
    logs = args.logs or [ROOT / p for p in DEFAULT_LOGS if (ROOT / p).is_dir()]
    pairs = args.pair if args.pair is not None else list(DEFAULT_PAIRS)
    if args.no_ext:
        os.environ["GRADCHECK_NO_EXT"] = "1"
    for tree in (args.a, args.b):  # as an installed package is (the Makefile's COMPILE)
        compileall.compile_dir(tree / "gradcheck", quiet=1)
    differ = same = 0
    for command in commands(logs, pairs):
        left, right = run(args.a, command), run(args.b, command)
        if left == right:
            same += 1
            continue
        differ += 1
        what = ("status", "stdout", "stderr")
        parts = [
            f"{name} {first_difference(x, y) if isinstance(x, bytes) else f'{x} ~ {y}'}"
            for name, x, y in zip(what, left, right, strict=True)
            if x != y
        ]
        print(f"DIFFER {' '.join(command)}: {'; '.join(parts)}", flush=True)
    print(f"{same} commands the same, {differ} different, over {len(logs)} log directories")
    return 1 if differ else 0


if __name__ == "__main__":
    raise SystemExit(main())
