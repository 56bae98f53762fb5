"""Two checkouts of gradcheck side by side: ``analyze`` of the same logs by each, alternating
within every repeat, medians and ranges of wall and CPU time, and their ratio (B over A): of
the medians, and each round's (its range too: steadier on a loaded machine). ``--rust`` runs
TensorBoard's Rust data server in the same rounds, and gives each checkout over it.

For a change whose gain or cost must be shown against the machine's noise (issue 17: the
process pool; issue 36: the reads); each checkout needs its extension built (``setup.py
build_ext --inplace``).

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

from bench import readers  # noqa: E402
from bench.measure import run_measured  # noqa: E402


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("a", type=Path, help="checkout A (the reference)")
    parser.add_argument("b", type=Path, help="checkout B")
    parser.add_argument("logs", type=Path, nargs="+", help="run directories to analyze")
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--jobs", default="default", help="1, 2, ... or default")
    parser.add_argument("--rust", action="store_true", help="the Rust server in each round too")
    args = parser.parse_args(argv)
    options = [] if args.jobs == "default" else ["-j", args.jobs]
    command = [sys.executable, "-m", "gradcheck", "analyze", "--format", "json"]
    command += ["--fail-on", "none", "--no-progress", *options]
    for tree in (args.a, args.b):  # as an installed package is (the Makefile's COMPILE)
        compileall.compile_dir(tree / "gradcheck", quiet=1)
    with tempfile.TemporaryDirectory() as scratch:
        out = Path(scratch) / "out.json"
        for log in args.logs:
            names = ["A", "B", "rust"] if args.rust else ["A", "B"]
            wall: dict[str, list[float]] = {name: [] for name in names}
            cpu: dict[str, list[float]] = {name: [] for name in names}
            other: list[float] = []
            digests = set()
            for repeat in range(args.repeats):
                for name in names[repeat % len(names) :] + names[: repeat % len(names)]:
                    if name == "rust":
                        server = readers.rust_command(str(log.resolve()), checksum=False)
                        result = run_measured(
                            server, dict(os.environ), Path(scratch), out, 3600, readers.RUST_READY
                        )
                    else:
                        tree = args.a if name == "A" else args.b
                        env = {**os.environ, "PYTHONPATH": str(tree.resolve())}
                        result = run_measured([*command, str(log.resolve())], env, tree, out, 3600)
                    if result.returncode not in (0, 1):
                        raise SystemExit(f"{name} failed on {log}: {result.stderr_tail}")
                    if name != "rust":
                        digests.add(hashlib.sha256(out.read_bytes()).hexdigest())
                    wall[name].append(result.wall_seconds)
                    cpu[name].append(result.cpu_seconds)
                    other.append(result.other_cpus)
            same = "same report" if len(digests) == 1 else "REPORTS DIFFER"
            print(f"{log.name} (jobs {args.jobs}, {args.repeats} rounds, {same}):")
            for name in names:
                w, c = wall[name], cpu[name]
                print(
                    f"  {name}: wall {statistics.median(w):.3f} s ({min(w):.3f}-{max(w):.3f}),"
                    f" cpu {statistics.median(c):.3f} s"
                )
            ratio = statistics.median(wall["B"]) / statistics.median(wall["A"])
            print(f"  B/A wall {ratio:.2f}, {_each_round(wall['B'], wall['A'])}")
            if args.rust:
                for name in ("A", "B"):
                    print(f"  {name}/rust {_each_round(wall[name], wall['rust'])}")
            print(f"  other processes kept {statistics.median(other):.2f} CPUs busy (median)")
    return 0


def _each_round(ours: Sequence[float], theirs: Sequence[float]) -> str:
    """The ratio of the two runs of each round: its median and range."""
    each = [x / y for x, y in zip(ours, theirs, strict=True)]
    return f"each round {statistics.median(each):.2f} ({min(each):.2f}-{max(each):.2f})"


if __name__ == "__main__":
    raise SystemExit(main())
