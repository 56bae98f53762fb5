"""How ``gradcheck analyze`` scales with the number of parameters (issue 16, section 4).

    python bench/params.py --counts 100,1000,10000,20000 --steps 5 --repeats 3

Writes one PyTorch-style event file per count (``<param>`` and ``<param>.grad`` histograms of
30 buckets at every step, a loss scalar), times ``gradcheck analyze DIR --jobs 1 --format json``
end to end in a fresh process (the median of the repeats), and prints seconds, microseconds per
parameter and step, and the slope of log(time) against log(parameters) between consecutive
counts: 1 is linear, 2 quadratic. The files go to a temporary folder, removed at the end.
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

if __package__ in (None, ""):  # run as a script: python bench/params.py
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402

from bench import encode  # noqa: E402

REPO = Path(__file__).resolve().parents[1]


def _histogram(scale: float) -> encode.TorchHistogram:
    edges = np.linspace(-scale, scale, 31)
    counts = np.full(30, 10.0)
    return encode.TorchHistogram(
        min=-scale,
        max=scale,
        num=300.0,
        sum=0.0,
        sum_squares=100.0 * scale * scale,
        bucket_limit=edges[1:],
        bucket=counts,
    )


def write_run(folder: Path, parameters: int, steps: int) -> Path:
    """A run of ``parameters`` parameters logged at ``steps`` steps."""
    folder.mkdir(parents=True)
    path = folder / "events.out.tfevents.1717000000.benchhost.4242.0"
    wall = 1_717_000_000.0
    with path.open("wb") as stream:
        stream.write(encode.frame(encode.file_version_event(wall, "bench")))
        for step in range(steps):
            weight, gradient = _histogram(0.1 + 0.01 * step), _histogram(0.01)
            for number in range(parameters):
                tag = f"layer{number}.weight"
                wall += 1e-5
                stream.write(encode.frame(encode.histo_event(tag, wall, step, weight)))
                stream.write(encode.frame(encode.histo_event(f"{tag}.grad", wall, step, gradient)))
            loss = encode.simple_value_event("Loss/train", wall, step, 1.0 / (step + 1))
            stream.write(encode.frame(loss))
    return folder


def time_analyze(folder: Path, repeats: int) -> float:
    """Median wall seconds of ``gradcheck analyze`` over ``repeats`` runs."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    command = [sys.executable, "-m", "gradcheck", "analyze", str(folder), "--jobs", "1"]
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        subprocess.run(
            [*command, "--format", "json"], stdout=subprocess.DEVNULL, env=env, check=False
        )
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--counts", default="100,1000,10000,20000")
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    counts = [int(text) for text in args.counts.split(",")]
    print(f"{'parameters':>10} {'MB':>7} {'seconds':>8} {'µs/param/step':>14} {'slope':>6}")
    previous: tuple[int, float] | None = None
    with tempfile.TemporaryDirectory() as root:
        for count in counts:
            folder = write_run(Path(root) / f"p{count}", count, args.steps)
            size = sum(p.stat().st_size for p in folder.iterdir()) / 1e6
            seconds = time_analyze(folder, args.repeats)
            per = seconds / (count * args.steps) * 1e6
            slope = (
                math.log(seconds / previous[1]) / math.log(count / previous[0])
                if previous
                else float("nan")
            )
            print(f"{count:>10} {size:>7.1f} {seconds:>8.2f} {per:>14.1f} {slope:>6.2f}")
            previous = (count, seconds)
    return 0


if __name__ == "__main__":
    sys.exit(main())
