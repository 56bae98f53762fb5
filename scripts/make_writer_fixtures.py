"""Write small event files with the real writers, for the reader's tests.

    TF_CPP_MIN_LOG_LEVEL=3 CUDA_VISIBLE_DEVICES= python scripts/make_writer_fixtures.py \
        --out tests/data/writers

Each writer gets its own directory (a run) holding its event file(s) and ``expected.json``: the
exact numbers the logged tensors had (element counts, min, max, sum, sum of squares), computed
here with numpy, so tests can check the reader's numbers against the source. Inputs are
deterministic (``linspace`` ramps scaled by the step, fixed seeds).

- ``tf2_summary``: ``tf.summary.histogram`` / ``tf.summary.scalar`` in a custom loop, plus the
  odd inputs (empty, constant, NaN, Inf) under their own tags.
- ``keras_callback``: ``keras.callbacks.TensorBoard(histogram_freq=1)`` through ``model.fit``.
- ``pytorch``: ``torch.utils.tensorboard.SummaryWriter.add_histogram`` / ``add_scalar``, plus a
  tensor holding NaN and Inf.
- ``tensorboardx``: ``tensorboardX.SummaryWriter``, same calls.

Run each writer in its own process (``--only``) if TensorFlow and torch disagree in one.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

STEPS = (0, 1, 2)
RAMP = np.linspace(-1.0, 1.0, 101)  # the weight-like tensor, scaled by (step + 1)


def stats(values: np.ndarray) -> dict[str, float | int]:
    """Exact numbers of a tensor, as float64 (JSON-safe: non-finite become strings)."""
    flat = np.asarray(values, dtype=np.float64).reshape(-1)
    finite = flat[np.isfinite(flat)]
    return {
        "count": int(flat.size),
        "finite_count": int(finite.size),
        "min": _json_float(flat.min()) if flat.size else None,
        "max": _json_float(flat.max()) if flat.size else None,
        "sum": _json_float(flat.sum()),
        "sum_squares": _json_float(np.dot(flat, flat)),
    }


def _json_float(value: float) -> float | str:
    value = float(value)
    return value if np.isfinite(value) else str(value)


def ramp(step: int) -> np.ndarray:
    return (RAMP * (step + 1)).astype(np.float32)


ODD_TENSORS: dict[str, np.ndarray] = {
    "odd/empty": np.zeros(0, dtype=np.float32),
    "odd/constant": np.full(7, 3.0, dtype=np.float32),
    "odd/nan": np.array([1.0, np.nan, 2.0], dtype=np.float32),
    "odd/inf": np.array([1.0, np.inf, 2.0, 4.0], dtype=np.float32),
}


def write_tf2_summary(out: Path) -> dict[str, Any]:
    import tensorflow as tf

    writer = tf.summary.create_file_writer(str(out))
    expected: dict[str, Any] = {"histograms": {}, "scalars": {}}
    with writer.as_default():
        for step in STEPS:
            tf.summary.histogram("dense/kernel", ramp(step), step=step)
            tf.summary.scalar("loss", 1.0 / (step + 1), step=step)
            expected["histograms"].setdefault("dense/kernel", {})[step] = stats(ramp(step))
            expected["scalars"].setdefault("loss", {})[step] = 1.0 / (step + 1)
        for tag, values in ODD_TENSORS.items():
            tf.summary.histogram(tag, values, step=0)
            expected["histograms"][tag] = {0: stats(values)}
    writer.close()
    expected["tensorflow"] = tf.__version__
    return expected


def write_keras_callback(out: Path) -> dict[str, Any]:
    import keras
    import tensorflow as tf

    tf.random.set_seed(0)
    keras.utils.set_random_seed(0)
    rng = np.random.default_rng(0)
    x = rng.normal(size=(64, 3)).astype(np.float32)
    y = (x @ np.array([[1.0], [-2.0], [0.5]], dtype=np.float32)).astype(np.float32)
    model = keras.Sequential(
        [keras.Input((3,)), keras.layers.Dense(4, name="hidden"), keras.layers.Dense(1, name="out")]
    )
    model.compile(optimizer="sgd", loss="mse")
    callback = keras.callbacks.TensorBoard(
        log_dir=str(out), histogram_freq=1, write_graph=False, profile_batch=0
    )
    model.fit(x, y, epochs=2, batch_size=16, verbose=0, callbacks=[callback], validation_split=0.25)
    final = {w.path: stats(w.numpy()) for w in model.weights}
    return {"final_weights": final, "epochs": 2, "keras": keras.__version__}


def write_pytorch(out: Path) -> dict[str, Any]:
    import torch
    from torch.utils.tensorboard import SummaryWriter

    return _torch_like(SummaryWriter(log_dir=str(out)), torch, {"torch": torch.__version__})


def write_tensorboardx(out: Path) -> dict[str, Any]:
    import tensorboardX
    import torch

    writer = tensorboardX.SummaryWriter(logdir=str(out))
    return _torch_like(writer, torch, {"tensorboardX": tensorboardX.__version__})


NON_FINITE = np.array([0.5, np.nan, np.inf, -1.5, 2.0], dtype=np.float32)


def _torch_like(writer: Any, torch: Any, versions: dict[str, str]) -> dict[str, Any]:
    expected: dict[str, Any] = {"histograms": {}, "scalars": {}, **versions}
    for step in STEPS:
        writer.add_histogram("fc.weight", torch.from_numpy(ramp(step)), step)
        writer.add_scalar("loss", 1.0 / (step + 1), step)
        expected["histograms"].setdefault("fc.weight", {})[step] = stats(ramp(step))
        expected["scalars"].setdefault("loss", {})[step] = 1.0 / (step + 1)
    writer.add_histogram("fc.weight.grad", torch.from_numpy(NON_FINITE), 0)
    expected["histograms"]["fc.weight.grad"] = {0: stats(NON_FINITE)}
    writer.close()
    return expected


WRITERS: dict[str, Callable[[Path], dict[str, Any]]] = {
    "tf2_summary": write_tf2_summary,
    "keras_callback": write_keras_callback,
    "pytorch": write_pytorch,
    "tensorboardx": write_tensorboardx,
}


def write_one(name: str, out: Path) -> None:
    run = out / name
    shutil.rmtree(run, ignore_errors=True)
    run.mkdir(parents=True)
    expected = WRITERS[name](run)
    (run / "expected.json").write_text(json.dumps(expected, indent=1, sort_keys=True) + "\n")
    sizes = {str(p.relative_to(out)): p.stat().st_size for p in run.rglob("*tfevents*")}
    print(name, sizes)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, default=Path("tests/data/writers"))
    parser.add_argument("--only", choices=sorted(WRITERS), help="one writer, in this process")
    args = parser.parse_args()
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")
    if args.only:
        write_one(args.only, args.out)
        return
    for name in WRITERS:  # one process per writer: TensorFlow and torch stay apart
        command = [sys.executable, __file__, "--out", str(args.out), "--only", name]
        subprocess.run(command, check=True)


if __name__ == "__main__":
    main()
