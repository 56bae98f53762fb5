"""Regenerate ``sample_runs/``: small real training runs with known pathologies.

    python scripts/make_sample_runs.py --out sample_runs [--only NAME ...]

Each run directory is deleted and rewritten by its training script (``sample_runs_keras.py``,
``sample_runs_torch.py``); then the key numbers read back from the files are printed, to check
that each pathology is real and visible. Deterministic (seeded) apart from wall times and the
host name in event file names; about a minute on 2 CPU cores.
"""

from __future__ import annotations

import argparse
import math
import shutil
import sys
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from gradcheck import tags  # noqa: E402
from gradcheck.events.discover import discover  # noqa: E402
from gradcheck.events.reader import read_run  # noqa: E402
from gradcheck.model import HistogramRecord, ScalarRecord  # noqa: E402
from gradcheck.series.stats import histogram_stats  # noqa: E402
from gradcheck.tags.scalars import scalar_role  # noqa: E402

Series = dict[str, dict[int, float]]  # parameter -> step -> value


def all_runs() -> dict[str, Callable[[Path], None]]:
    """Every sample run by name (imports TensorFlow and torch)."""
    import sample_runs_keras
    import sample_runs_torch

    return {**sample_runs_keras.RUNS, **sample_runs_torch.RUNS}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("sample_runs"))
    parser.add_argument("--only", nargs="*", help="regenerate only these runs")
    args = parser.parse_args(argv)
    runs = all_runs()
    unknown = set(args.only or ()) - set(runs)
    if unknown:
        parser.error(f"unknown run(s): {', '.join(sorted(unknown))}; known: {', '.join(runs)}")
    for name, train in runs.items():
        if args.only and name not in args.only:
            continue
        run_dir = args.out / name
        shutil.rmtree(run_dir, ignore_errors=True)
        run_dir.mkdir(parents=True)
        started = time.perf_counter()
        train(run_dir)
        print(summarise(run_dir, time.perf_counter() - started))
    return 0


def summarise(run_dir: Path, seconds: float) -> str:
    """Key numbers of a run, read back from its files: gradient norms per parameter (exact
    scalars when logged, else from histograms), first non-finite step, weight movement."""
    grad_norms, weight_norms, nonfinite = _read_series(run_dir)
    size = sum(f.stat().st_size for f in run_dir.rglob("*") if f.is_file())
    lines = [f"== {run_dir.name}: {seconds:.1f} s, {size / 1024:.0f} KB"]
    largest = max((_median(s) for s in grad_norms.values()), default=math.nan)
    for name in sorted(set(grad_norms) | set(weight_norms), key=_depth_key):
        lines.append("  " + _parameter_line(name, grad_norms, weight_norms, largest))
    bad_steps = [step for series in nonfinite.values() for step, v in series.items() if v]
    if bad_steps:
        lines.append(f"  first non-finite gradient at step {min(bad_steps)}")
    return "\n".join(lines)


def _parameter_line(name: str, grads: Series, weights: Series, largest: float) -> str:
    text = f"{name:<34}"
    if name in grads:
        steps = sorted(grads[name])
        first, last, peak = (grads[name][steps[0]], grads[name][steps[-1]], _max(grads[name]))
        ratio = _median(grads[name]) / largest
        text += f" grad first {first:8.2e} max {peak:8.2e} last {last:8.2e} ratio {ratio:8.1e}"
    if name in weights:
        steps = sorted(weights[name])
        first, last = weights[name][steps[0]], weights[name][steps[-1]]
        text += f" | weight norm {first:.4g} -> {last:.4g}"
    return text


def _read_series(run_dir: Path) -> tuple[Series, Series, Series]:
    grads: Series = defaultdict(dict)
    weights: Series = defaultdict(dict)
    nonfinite: Series = defaultdict(dict)
    exact: set[tuple[str, str]] = set()
    for run in discover([str(run_dir)]):
        for record in read_run(run):
            if isinstance(record, ScalarRecord):
                _add_scalar(record, grads, weights, nonfinite, exact)
            elif isinstance(record, HistogramRecord):
                _add_histogram(record, grads, weights, nonfinite, exact)
    return dict(grads), dict(weights), dict(nonfinite)


def _add_scalar(
    record: ScalarRecord, grads: Series, weights: Series, nonfinite: Series, exact: set
) -> None:
    role = scalar_role(record.tag)
    if role is None or role.name is None:
        return
    target = {"grad_norm": grads, "weight_norm": weights, "grad_nonfinite": nonfinite}.get(
        role.kind
    )
    if target is not None:
        target[role.name][record.step] = record.value
        exact.add((role.kind, role.name))


def _add_histogram(
    record: HistogramRecord, grads: Series, weights: Series, nonfinite: Series, exact: set
) -> None:
    role = tags.classify_tag(record.tag)
    name = tags.parameter_name(record.tag)
    if role == "other":
        return
    stats = histogram_stats(
        record.left,
        record.right,
        record.counts,
        min=record.min,
        max=record.max,
        num=record.num,
        sum=record.sum,
        sum_squares=record.sum_squares,
    )
    kind, target = ("grad_norm", grads) if role == "gradient" else ("weight_norm", weights)
    if (kind, name) not in exact:
        target[name][record.step] = stats.l2_norm
    if role == "gradient" and ("grad_nonfinite", name) not in exact:
        nonfinite[name][record.step] = float(stats.has_nonfinite)


def _median(series: dict[int, float]) -> float:
    finite = [v for v in series.values() if math.isfinite(v)]
    return float(np.median(finite)) if finite else math.nan


def _max(series: dict[int, float]) -> float:
    finite = [v for v in series.values() if math.isfinite(v)]
    return max(finite) if finite else math.nan


def _depth_key(name: str) -> tuple[str, int, str]:
    """Order parameters by layer number where the name has one (dense_2 before dense_10)."""
    digits = "".join(ch if ch.isdigit() else " " for ch in name).split()
    return (name.split("/")[0].rstrip("0123456789_."), int(digits[0]) if digits else -1, name)


if __name__ == "__main__":
    sys.exit(main())
