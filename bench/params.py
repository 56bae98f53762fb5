"""How ``gradcheck analyze`` scales with the number of parameters (issues 16 and 22).

    python bench/params.py --counts 100,1000,5000,20000 --steps 50 --repeats 3

Writes one PyTorch-style event file per count under ``bench/data/params-<count>x<steps>``
(kept for the next run): ``layer<i>.weight`` and ``layer<i>.weight.grad`` histograms of 30
buckets for every parameter at every step, and a loss scalar; each histogram's scale differs by
parameter and by step, so no two consecutive histograms of a tag are equal. Then it times, in
fresh processes alternating round-robin (``bench/run.py``'s ``measure_dataset``),
``gradcheck analyze --jobs 1`` and TensorBoard's Rust data server (``rust``) on each log, and
``gradcheck analyze`` of a tiny log (``tiny``: 4 parameters, 5 steps) for the start-up.

It prints, per count, the medians: gradcheck's seconds, its cost per histogram once the tiny
run's time is subtracted, that cost over the cost at 1,000 parameters (issue 22's target: at
most 1.25x), the slope of log(time after start-up) against log(parameters) (1 is linear),
gradcheck's and the Rust server's peak memory, and gradcheck's time over the server's.
``bench/run.py`` runs the same series as part of ``make bench`` (``--series params``).
"""

from __future__ import annotations

import argparse
import math
import re
import sys
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

if __package__ in (None, ""):  # run as a script: python bench/params.py
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402

from bench import encode, gen  # noqa: E402

if TYPE_CHECKING:
    from bench.report import DatasetSummary

BUCKETS = 30
TINY = (4, 5)  # parameters, steps of the tiny run that measures start-up
_EDGES = np.linspace(-1.0, 1.0, BUCKETS + 1)
_COUNTS = np.full(BUCKETS, 10.0)
_SQUARES = float((_COUNTS * ((_EDGES[1:] + _EDGES[:-1]) / 2) ** 2).sum())


def histogram(scale: float) -> encode.TorchHistogram:
    """300 values spread evenly over [-scale, scale] in 30 buckets."""
    return encode.TorchHistogram(
        min=-scale,
        max=scale,
        num=float(_COUNTS.sum()),
        sum=0.0,
        sum_squares=_SQUARES * scale * scale,
        bucket_limit=_EDGES[1:] * scale,
        bucket=_COUNTS,
    )


def dataset_name(parameters: int, steps: int) -> str:
    """``params-1000x50``: the log of 1,000 parameters logged at 50 steps."""
    return f"params-{parameters}x{steps}"


def write_run(folder: Path, parameters: int, steps: int) -> Path:
    """A run of ``parameters`` parameters logged at ``steps`` steps: each weight's scale grows
    with the step and differs by parameter; each gradient's scale wobbles from step to step."""
    folder.mkdir(parents=True, exist_ok=True)
    for old in folder.glob("*tfevents*"):
        old.unlink()
    path = folder / "events.out.tfevents.1717000000.benchhost.4242.0"
    wall = gen.START_WALL_TIME
    spread = 1.0 + 0.05 * (np.arange(parameters) * 7919 % 101) / 101
    with path.open("wb", buffering=1 << 24) as stream:
        stream.write(encode.frame(encode.file_version_event(wall, "bench")))
        for step in range(steps):
            weights = (0.1 + 0.001 * step) * spread
            gradients = 0.01 * (1.0 + 0.02 * ((np.arange(parameters) + 31 * step) % 17))
            for number in range(parameters):
                tag = f"layer{number}.weight"
                wall += 1e-5
                weight = histogram(float(weights[number]))
                gradient = histogram(float(gradients[number]))
                stream.write(encode.frame(encode.histo_event(tag, wall, step, weight)))
                stream.write(encode.frame(encode.histo_event(f"{tag}.grad", wall, step, gradient)))
            loss = encode.simple_value_event("Loss/train", wall, step, 1.0 / (step + 1))
            stream.write(encode.frame(loss))
    return path


def ensure_log(data_dir: Path, parameters: int, steps: int) -> gen.DatasetInfo:
    """The log of ``parameters`` x ``steps`` under ``data_dir``, written first if missing."""
    import json
    import time
    from dataclasses import asdict

    name = dataset_name(parameters, steps)
    if (info := gen.load_info(data_dir, name)) is not None:
        return info
    started = time.perf_counter()
    gen.info_path(data_dir, name).unlink(missing_ok=True)
    path = write_run(data_dir.resolve() / name, parameters, steps)
    info = gen.DatasetInfo(
        name=name,
        encoding="histo",
        directory=str(path.parent),
        files=(str(path),),
        bytes=path.stat().st_size,
        steps=steps,
        histograms=2 * parameters * steps,
        scalars=steps,
        parameters=parameters,
        generator_version=gen.GENERATOR_VERSION,
        seconds=round(time.perf_counter() - started, 2),
    )
    gen.info_path(data_dir, name).write_text(json.dumps(asdict(info), indent=1) + "\n")
    return info


def tiny_name() -> str:
    """The tiny run's dataset: its time is the start-up the series subtracts."""
    return dataset_name(*TINY)


READER = "gradcheck-1job"  # the series times analyze --jobs 1, as issue 22 quotes it


def _parse_name(name: str) -> tuple[int, int] | None:
    match = re.fullmatch(r"params-(\d+)x(\d+)", name)
    return (int(match.group(1)), int(match.group(2))) if match and name != tiny_name() else None


def costs_by_steps(
    summaries: Mapping[str, DatasetSummary],
) -> dict[int, tuple[float, dict[int, float]]]:
    """For each number of steps measured: the tiny run's median (the start-up) and, by
    parameter count, gradcheck's microseconds per histogram once that start-up is
    subtracted."""
    tiny = summaries.get(tiny_name())
    start_up = tiny.readers[READER].wall_seconds if tiny and READER in tiny.readers else 0.0
    found: dict[int, tuple[float, dict[int, float]]] = {}
    for name, summary in sorted(summaries.items(), key=lambda item: _parse_name(item[0]) or ()):
        parsed = _parse_name(name)
        if parsed is None or READER not in summary.readers:
            continue
        work = summary.readers[READER].wall_seconds - start_up
        found.setdefault(parsed[1], (start_up, {}))[1][parsed[0]] = work / summary.histograms * 1e6
    return found


def render(summaries: Mapping[str, DatasetSummary]) -> list[str]:
    """The series' table, one per number of steps: ``summaries`` by dataset name, the tiny
    run's among them."""
    lines: list[str] = []
    header = (
        f"{'params':>7}{'MB':>7}{'hists':>9}{'gc s':>7}{'µs/hist':>9}{'vs 1000':>8}{'slope':>6}"
        f"{'gc MB':>7}{'rust s':>7}{'rust MB':>8}{'gc/rust':>8}"
    )
    for steps, (start_up, costs) in costs_by_steps(summaries).items():
        lines += [
            f"parameter series, {steps} steps, analyze --jobs 1: µs/hist after the tiny run's"
            f" {start_up:.3f} s (start-up), over the cost at 1,000 parameters (target 1.25 at"
            " most), slope of log(time after start-up) vs log(parameters) (1 = linear)",
            header,
            "-" * len(header),
        ]
        previous: tuple[int, float] | None = None
        for count, cost in costs.items():
            found = summaries[dataset_name(count, steps)]
            gc, rust = found.readers[READER], found.readers.get("rust")
            work = cost * found.histograms
            slope = "-"
            if previous and work > 0 and previous[1] > 0:
                slope = f"{math.log(work / previous[1]) / math.log(count / previous[0]):.2f}"
            previous = (count, work)
            against = f"{cost / costs[1000]:.2f}" if 1000 in costs else "-"
            server = (
                f"{rust.wall_seconds:>7.2f}{rust.tree_rss_mb:>8.0f}"
                f"{gc.wall_seconds / rust.wall_seconds:>8.2f}"
                if rust and not rust.problems
                else f"{'-':>7}{'-':>8}{'-':>8}"
            )
            lines.append(
                f"{count:>7}{found.megabytes:>7.0f}{found.histograms:>9}{gc.wall_seconds:>7.2f}"
                f"{cost:>9.2f}{against:>8}{slope:>6}{gc.tree_rss_mb:>7.0f}{server}"
            )
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    """Write what is missing, measure gradcheck and the Rust server, print the table."""
    from bench import report, run

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--counts", default="100,1000,5000,20000")
    parser.add_argument("--steps", type=int, default=50)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--data", type=Path, default=gen.DATA_DIR)
    parser.add_argument("--no-rust", action="store_true", help="gradcheck only")
    args = parser.parse_args(argv)
    counts = [int(text) for text in args.counts.split(",")]
    readers = [run.READERS[READER]] + ([] if args.no_rust else [run.READERS["rust"]])
    env = run.child_environment(args.data)
    infos = {tiny_name(): ensure_log(args.data, *TINY)}
    infos.update(
        {dataset_name(c, args.steps): ensure_log(args.data, c, args.steps) for c in counts}
    )
    results: list[run.Result] = []
    with tempfile.TemporaryDirectory(prefix="gradcheck-bench-") as scratch:
        warmed: set[str] = set()
        for info in infos.values():
            chosen = readers[:1] if info.name == tiny_name() else readers
            results += run.measure_dataset(
                info, chosen, args.repeats, Path(scratch), env, 3600, warmed
            )
    summaries = {s.dataset: s for s in report.summarise(results, infos)}
    print("\n".join(render(summaries)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
