"""Overhead of ``gradcheck.keras.GradientLogger`` on a small Keras model.

    python bench/callback_overhead.py [--repeats 5] [--steps 200] [--json FILE]

Times ``model.fit`` epochs of ``--steps`` steps (batch 64, a 784-256-128-10 ReLU MLP: 235k
parameters) without the callback and with it at several logging frequencies: for each, one
epoch to set up (the callback traces its logging function at its first log), then ``--repeats``
timed epochs with the same callback. Reports medians: the cost of one logged step (gradients on
a 256-row batch, weight and gradient histograms and norms for 6 variables), the slowdown of an
epoch, and the one-off setup cost.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from dataclasses import asdict, dataclass

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from gradcheck.keras import GradientLogger  # noqa: E402

keras = tf.keras
BATCH = 64
LOGGING_BATCH = 256


@dataclass(frozen=True)
class Timing:
    """One configuration: median epoch time, the callback's one-off cost, per-logged-step cost."""

    name: str
    every_n_steps: int | None
    histograms: bool
    epoch_seconds: float  # median over the timed epochs
    setup_seconds: float | None  # first epoch minus the median: tracing, writer creation
    logged_steps_per_epoch: int
    seconds_per_logged_step: float | None  # (epoch - baseline epoch) / logged steps
    callback_seconds_per_logged_step: float | None  # the callback's own clock, cross-check


def build_model() -> keras.Model:
    keras.utils.set_random_seed(0)
    model = keras.Sequential(
        [
            keras.Input((784,)),
            keras.layers.Dense(256, activation="relu"),
            keras.layers.Dense(128, activation="relu"),
            keras.layers.Dense(10, activation="softmax"),
        ]
    )
    model.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
    return model


def time_epoch(model: keras.Model, data: tuple[np.ndarray, np.ndarray], callbacks: list) -> float:
    started = time.perf_counter()
    model.fit(*data, batch_size=BATCH, epochs=1, verbose=0, callbacks=callbacks)
    return time.perf_counter() - started


def measure_callback(
    model: keras.Model,
    data: tuple[np.ndarray, np.ndarray],
    every_n_steps: int,
    histograms: bool,
    repeats: int,
    baseline: float,
) -> Timing:
    """One epoch to set up (tracing), then ``repeats`` timed epochs with the same callback."""
    x, y = data
    steps = len(x) // BATCH
    with tempfile.TemporaryDirectory() as log_dir:
        logger = GradientLogger(
            log_dir,
            data=(x[:LOGGING_BATCH], y[:LOGGING_BATCH]),
            every_n_steps=every_n_steps,
            histograms=histograms,
        )
        first = time_epoch(model, data, [logger])
        logging_before = logger.seconds_logging
        epochs = [time_epoch(model, data, [logger]) for _ in range(repeats)]
        logger.close()
    epoch = statistics.median(epochs)
    logged = steps // every_n_steps
    callback_seconds = (logger.seconds_logging - logging_before) / (repeats * logged)
    return Timing(
        name=f"every {every_n_steps} steps" + ("" if histograms else ", no histograms"),
        every_n_steps=every_n_steps,
        histograms=histograms,
        epoch_seconds=epoch,
        setup_seconds=first - epoch,
        logged_steps_per_epoch=logged,
        seconds_per_logged_step=(epoch - baseline) / logged,
        callback_seconds_per_logged_step=callback_seconds,
    )


def measure(repeats: int, steps: int) -> list[Timing]:
    rng = np.random.default_rng(0)
    data = (
        rng.normal(size=(steps * BATCH, 784)).astype("float32"),
        rng.integers(0, 10, size=steps * BATCH),
    )
    model = build_model()
    time_epoch(model, data, [])  # warm-up: tracing of the training step, allocations
    baseline = statistics.median(time_epoch(model, data, []) for _ in range(repeats))
    timings = [Timing("no callback", None, False, baseline, None, 0, None, None)]
    for every_n_steps, histograms in ((1, True), (1, False), (10, True), (100, True)):
        timings.append(measure_callback(model, data, every_n_steps, histograms, repeats, baseline))
    return timings


def report(timings: list[Timing], steps: int) -> str:
    baseline = timings[0].epoch_seconds
    lines = [
        f"one epoch = {steps} steps of batch {BATCH}, 235k-parameter MLP; medians:",
        f"  {'configuration':<28} {'epoch':>8} {'slowdown':>8} {'(own clock)':>11} "
        f"{'per logged step':>15} {'(own clock)':>11} {'one-off':>9}",
    ]
    for timing in timings:
        own = timing.callback_seconds_per_logged_step
        own_slowdown = (
            "-" if own is None else f"{own * timing.logged_steps_per_epoch / baseline:.0%}"
        )
        lines.append(
            f"  {timing.name:<28} {timing.epoch_seconds * 1000:5.0f} ms "
            f"{timing.epoch_seconds / baseline - 1:8.0%} {own_slowdown:>11} "
            f"{_ms(timing.seconds_per_logged_step):>15} {_ms(own):>11} "
            f"{_ms(timing.setup_seconds):>9}"
        )
    lines.append(f"  one training step: {baseline / steps * 1000:.2f} ms")
    lines.append("  (own clock): the callback's time per logged step, and the slowdown it implies")
    return "\n".join(lines)


def _ms(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds * 1000:.1f} ms"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--json", help="also write the timings to this JSON file")
    args = parser.parse_args()
    timings = measure(args.repeats, args.steps)
    print(report(timings, args.steps))
    if args.json:
        with open(args.json, "w") as stream:
            json.dump([asdict(t) for t in timings], stream, indent=2)


if __name__ == "__main__":
    main()
