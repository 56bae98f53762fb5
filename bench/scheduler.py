"""Sweeps of many small runs: runs per second with ``-j 1``, the default jobs, and a Dask
``--scheduler local:N``, beside TensorBoard's Rust data server (issue 20, part 2).

Each configuration runs as its own process on the same sweep (files in the page cache),
the configurations alternating round-robin within each repeat; the median and the range of
the repeats are printed, with the CPU other processes used meanwhile (noise), and the
reports of all gradcheck configurations are checked identical. The local cluster's start
(~1-3 s) is part of its time: it is what a user of ``local:N`` waits for.

    python bench/scheduler.py --sweeps 1000runs200kB,5000runs200kB --repeats 3
"""

from __future__ import annotations

import argparse
import hashlib
import os
import statistics
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

if __package__ in (None, ""):  # run as a script: python bench/scheduler.py
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import gen, readers  # noqa: E402
from bench.measure import run_measured  # noqa: E402

REPO = Path(__file__).resolve().parents[1]


def configurations(local: int, rust: bool) -> dict[str, list[str]]:
    """Each configuration's command, without the sweep's path (appended)."""
    gradcheck = [sys.executable, "-m", "gradcheck", "analyze", "--format", "json"]
    gradcheck += ["--fail-on", "none", "--no-progress"]
    chosen = {
        "-j 1": [*gradcheck, "-j", "1"],
        "default": gradcheck,
        f"local:{local}": [*gradcheck, "--scheduler", f"local:{local}"],
    }
    if rust:
        chosen["rust"] = []  # built per path: readers.rust_command
    return chosen


def measure(path: Path, repeats: int, local: int, rust: bool) -> dict[str, list[float]]:
    """Wall seconds of every configuration, ``repeats`` times, alternating."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    chosen = configurations(local, rust)
    seconds: dict[str, list[float]] = {name: [] for name in chosen}
    other: list[float] = []
    digests: dict[str, set[str]] = {name: set() for name in chosen if name != "rust"}
    with tempfile.TemporaryDirectory() as scratch:
        out = Path(scratch) / "out.txt"
        for _ in range(repeats):
            for name, command in chosen.items():
                if name == "rust":
                    full = readers.rust_command(str(path), checksum=False)
                    result = run_measured(full, env, REPO, out, 3600, ready="Finished load cycle")
                else:
                    result = run_measured([*command, str(path)], env, REPO, out, 3600)
                    digests[name].add(hashlib.sha256(out.read_bytes()).hexdigest())
                if result.returncode not in (0, 1):
                    raise SystemExit(f"{name} failed ({result.returncode}): {result.stderr_tail}")
                seconds[name].append(result.wall_seconds)
                other.append(result.other_cpus)
    if len({digest for found in digests.values() for digest in found}) != 1:
        raise SystemExit(f"the reports differ between configurations on {path}")
    seconds["(other CPUs busy)"] = other
    return seconds


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=REPO / "bench" / "data")
    parser.add_argument("--sweeps", default="1000runs200kB,5000runs200kB")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--local", type=int, default=2, help="workers of --scheduler local:N")
    parser.add_argument("--no-rust", action="store_true", help="skip the Rust data server")
    args = parser.parse_args(argv)
    layouts = [item.strip() for item in args.sweeps.split(",") if item.strip()]
    for name in gen.dataset_names([], ["tensor"], layouts):
        path = args.data / name
        layout = name.split("-", 1)[1]
        gen.main(
            ["--data", str(args.data), "--encodings", "tensor", "--sizes", "", "--multi", layout]
        )
        runs = sum(1 for child in path.iterdir() if child.is_dir())
        seconds = measure(path, args.repeats, args.local, rust=not args.no_rust)
        print(f"{name}: {runs} runs, medians of {args.repeats} (range)")
        other = seconds.pop("(other CPUs busy)")
        for config, values in seconds.items():
            median = statistics.median(values)
            print(
                f"  {config:>10}: {median:7.2f} s ({min(values):.2f}-{max(values):.2f}), "
                f"{runs / median:7.1f} runs/s, {1000 * median / runs:6.2f} ms a run"
            )
        print(f"  other processes kept {statistics.median(other):.2f} CPUs busy (median)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
