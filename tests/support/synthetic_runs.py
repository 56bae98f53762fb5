"""Small runs written as real event files (tensorboard's pure-Python record writer).

A healthy run, and a run whose gradients grow tenfold every two steps from ``BLOW_UP`` until
they are NaN from ``NAN_FROM`` (written the way PyTorch writes a non-finite tensor: NaN
``min``/``max``/``sum`` and no bucket counts).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from tensorboard.compat.proto import summary_pb2

from tests.support import eventfiles as ef

PARAMETERS = {"fc1.weight": (64, 32), "fc1.bias": (64,), "fc2.weight": (10, 64)}
STEPS = 40
BLOW_UP = 10  # the exploding run's gradients grow from this step on
NAN_FROM = 24  # and are NaN from this step on


def gradient_scale(step: int, exploding: bool) -> float:
    """Healthy: about 0.1 and slowly shrinking. Exploding: x10 every two steps after BLOW_UP."""
    if exploding and step >= NAN_FROM:
        return float("nan")
    if exploding and step >= BLOW_UP:
        return 0.1 * 10 ** ((step - BLOW_UP) / 2)
    return 0.1 * 0.99**step


def nan_histo(tag: str, size: int) -> summary_pb2.Summary.Value:
    """A non-finite tensor as PyTorch's writer records it: NaN min/max/sum, no bucket counts."""
    nan = float("nan")
    return ef.histo(
        tag, [0.0, 1.0], [0.0, 0.0], min=nan, max=nan, num=size, sum=nan, sum_squares=nan
    )


def write_run(directory: Path, *, exploding: bool, seed: int = 0, files: int = 1) -> Path:
    """A run of 40 steps logging weights/<p> and gradients/<p> histograms for 3 parameters.

    With ``files > 1`` the steps are split over that many event files, as a resumed or
    rotated writer leaves them.
    """
    rng = np.random.default_rng(seed)
    weights = {name: rng.normal(0, 0.3, shape) for name, shape in PARAMETERS.items()}
    events = []
    for step in range(STEPS):
        scale = gradient_scale(step, exploding)
        values = []
        for name, shape in PARAMETERS.items():
            gradient = rng.normal(0, 1, shape) * scale
            size = int(np.prod(shape))
            if np.isfinite(scale):
                weights[name] = weights[name] - 0.01 * gradient
                values.append(ef.histo_of(f"gradients/{name}", gradient.reshape(-1)))
            else:
                values.append(nan_histo(f"gradients/{name}", size))
            if np.all(np.isfinite(weights[name])):
                values.append(ef.histo_of(f"weights/{name}", weights[name].reshape(-1)))
            else:
                values.append(nan_histo(f"weights/{name}", size))
        values.append(ef.simple_scalar("loss", 2.3 * 0.98**step if np.isfinite(scale) else scale))
        events.append(ef.summary_event(step, values))
    directory.mkdir(parents=True, exist_ok=True)
    for part in range(files):
        chunk = events[part * len(events) // files : (part + 1) * len(events) // files]
        name = f"events.out.tfevents.{1700000000 + part}.host.1.0"
        ef.write_events(directory / name, [ef.file_version(), *chunk])
    return directory
