"""How judging a run scales with its number of parameters when there are few steps (issue 30).

    python bench/verdict_slope.py --counts 2000,4000,8000,16000 --repeats 3

Reading costs per histogram (``bench/params.py``); judging costs per parameter, and with few
logged steps it is most of the time, so a run-wide quantity found again for every parameter
shows as a slope above 1. Two logs per count under ``bench/data/verdicts-<scenario>-<n>x<steps>``
(kept for the next run), PyTorch-style ``layer<i>.weight`` and ``layer<i>.weight.grad``
histograms of 30 buckets and a loss scalar:

- ``static`` (3 steps): weights bit-identical, gradients constant: every parameter is static
  and every gradient norm sits at its own ceiling (the largest other movement, the clip
  ceilings' groups);
- ``exploding`` (12 steps): every gradient rises 10,000x from step 6 (the other gradients'
  levels during each rise).

It times ``gradcheck analyze --jobs 1 --format json`` in fresh processes, alternating, and
prints per count the median seconds, that time over the first count's, and the slope of
log(time) against log(parameters) from the previous count (1 = linear; start-up, ~0.15 s,
is not subtracted, so small counts look flatter than they are).
"""

from __future__ import annotations

import argparse
import math
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

if __package__ in (None, ""):  # run as a script: python bench/verdict_slope.py
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402

from bench import encode, gen  # noqa: E402
from bench.params import histogram  # noqa: E402

Scales = Callable[[np.ndarray, int], tuple[np.ndarray, np.ndarray]]


def _static(spread: np.ndarray, step: int) -> tuple[np.ndarray, np.ndarray]:
    return 0.1 * spread, 0.01 * spread


def _exploding(spread: np.ndarray, step: int) -> tuple[np.ndarray, np.ndarray]:
    rise = 1e4 * (1 + 0.3 * step) if step >= 6 else 1.0
    return (0.1 + 0.001 * step) * spread, 0.01 * spread * rise


SCENARIOS: dict[str, tuple[int, Scales]] = {"static": (3, _static), "exploding": (12, _exploding)}


def write_run(folder: Path, parameters: int, scenario: str) -> Path:
    """The log of ``scenario`` with ``parameters`` parameters (written once, then reused)."""
    steps, scales = SCENARIOS[scenario]
    path = folder / "events.out.tfevents.1717000000.benchhost.4242.0"
    if path.exists():
        return folder
    folder.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(".partial")
    wall = gen.START_WALL_TIME
    spread = 1.0 + 0.05 * (np.arange(parameters) * 7919 % 101) / 101
    with partial.open("wb", buffering=1 << 24) as stream:
        stream.write(encode.frame(encode.file_version_event(wall, "bench")))
        for step in range(steps):
            weights, gradients = scales(spread, step)
            for number in range(parameters):
                tag = f"layer{number}.weight"
                wall += 1e-5
                for name, scale in ((tag, weights[number]), (f"{tag}.grad", gradients[number])):
                    event = encode.histo_event(name, wall, step, histogram(float(scale)))
                    stream.write(encode.frame(event))
            stream.write(encode.frame(encode.simple_value_event("Loss/train", wall, step, 1.0)))
    partial.rename(path)
    return folder


def _seconds(folder: Path) -> float:
    command = [sys.executable, "-m", "gradcheck", "analyze", str(folder), "--jobs", "1"]
    started = time.perf_counter()
    subprocess.run([*command, "--format", "json", "--fail-on", "none"], check=True,
                   stdout=subprocess.DEVNULL)  # fmt: skip
    return time.perf_counter() - started


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--counts", default="2000,4000,8000,16000")
    parser.add_argument("--scenarios", default="static,exploding")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--data", type=Path, default=gen.DATA_DIR)
    args = parser.parse_args(argv)
    counts = [int(text) for text in args.counts.split(",")]
    for scenario in args.scenarios.split(","):
        steps = SCENARIOS[scenario][0]
        folders = {
            n: write_run(args.data / f"verdicts-{scenario}-{n}x{steps}", n, scenario)
            for n in counts
        }
        times: dict[int, list[float]] = {n: [] for n in counts}
        for n in counts:
            _seconds(folders[n])  # warm the page cache and the bytecode
        for _ in range(args.repeats):
            for n in counts:
                times[n].append(_seconds(folders[n]))
        print(
            f"{scenario}, {steps} steps: analyze --jobs 1 --format json, median of {args.repeats}"
        )
        print(f"{'params':>8}{'seconds':>9}{'vs first':>9}{'slope':>7}")
        previous: tuple[int, float] | None = None
        for n in counts:
            median = statistics.median(times[n])
            first = statistics.median(times[counts[0]])
            slope = "-" if previous is None else (
                f"{math.log(median / previous[1]) / math.log(n / previous[0]):.2f}"
            )  # fmt: skip
            print(f"{n:>8}{median:>9.2f}{median / first:>9.2f}{slope:>7}")
            previous = (n, median)
    return 0


if __name__ == "__main__":
    sys.exit(main())
