"""Two checkouts of gradcheck side by side: ``analyze`` of the same logs by each, alternating
within every repeat, medians and ranges of wall and CPU time, and their ratio (B over A).

For a change whose gain or cost must be shown against the machine's noise (issue 17: the
process pool); each checkout needs its extension built (``setup.py build_ext --inplace``).

    python bench/ab.py /work/wt-base /work/main bench/data/tensor-160MB bench/data/tensor-1GB
"""

from __future__ import annotations

import argparse
import compileall
import hashlib
import os
import statistics
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

if __package__ in (None, ""):  # run as a script: python bench/ab.py
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.measure import run_measured  # noqa: E402


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("a", type=Path, help="checkout A (the reference)")
    parser.add_argument("b", type=Path, help="checkout B")
    parser.add_argument("logs", type=Path, nargs="+", help="run directories to analyze")
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--jobs", default="default", help="1, 2, ... or default")
    args = parser.parse_args(argv)
    options = [] if args.jobs == "default" else ["-j", args.jobs]
    command = [sys.executable, "-m", "gradcheck", "analyze", "--format", "json"]
    command += ["--fail-on", "none", "--no-progress", *options]
    for tree in (args.a, args.b):  # as an installed package is (the Makefile's COMPILE)
        compileall.compile_dir(tree / "gradcheck", quiet=1)
    with tempfile.TemporaryDirectory() as scratch:
        out = Path(scratch) / "out.json"
        for log in args.logs:
            wall: dict[str, list[float]] = {"A": [], "B": []}
            cpu: dict[str, list[float]] = {"A": [], "B": []}
            other: list[float] = []
            digests = set()
            for _ in range(args.repeats):
                for name, tree in (("A", args.a), ("B", args.b)):
                    env = {**os.environ, "PYTHONPATH": str(tree.resolve())}
                    result = run_measured([*command, str(log)], env, tree, out, 3600)
                    if result.returncode not in (0, 1):
                        raise SystemExit(f"{name} failed on {log}: {result.stderr_tail}")
                    digests.add(hashlib.sha256(out.read_bytes()).hexdigest())
                    wall[name].append(result.wall_seconds)
                    cpu[name].append(result.cpu_seconds)
                    other.append(result.other_cpus)
            same = "same report" if len(digests) == 1 else "REPORTS DIFFER"
            print(f"{log.name} (jobs {args.jobs}, {args.repeats} repeats, {same}):")
            for name in ("A", "B"):
                w, c = wall[name], cpu[name]
                print(
                    f"  {name}: wall {statistics.median(w):.3f} s ({min(w):.3f}-{max(w):.3f}),"
                    f" cpu {statistics.median(c):.3f} s"
                )
            ratio = statistics.median(wall["B"]) / statistics.median(wall["A"])
            print(f"  B/A wall {ratio:.2f}; other processes kept {statistics.median(other):.2f}")
            print("  CPUs busy (median)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
