"""The simulated network: parameter names and shapes, and how their values evolve over steps.

Two realistic architectures: a Keras-named VGG-style CNN (``conv2d_1/kernel``,
``batch_normalization_1/gamma``, ``dense/kernel``: 64 parameters) for the TF2 tensor encoding,
and a torchvision ResNet-18 (``layer1.0.conv1.weight``, ``bn1.bias``, ``fc.weight``: 62
parameters) for the PyTorch ``HistogramProto`` encoding.

Values are real samples, redrawn every step and vectorised over all parameters: each parameter
is represented by ``samples`` values that stand for its ``numel`` elements (each sample weighs
``numel / samples``). Weights follow a slow AR(1) walk around an evolving scale (norms drift,
distributions change, never bit-identical), gradients are fresh heavy-tailed draws whose
scale decays over training with per-step jitter and depth-dependent size.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import numpy as np

ParamKind = Literal["kernel", "bias", "gamma", "beta"]

WEIGHT_TIME_CONSTANT = 1000.0  # steps over which weight scales settle
GRADIENT_TIME_CONSTANT = 1500.0  # steps over which gradient norms decay
WEIGHT_WALK = 0.02  # AR(1) innovation per step of the weights' standardised values
REDRAW_PROBABILITY = 0.02  # chance per step that a parameter's weights are redrawn afresh


@dataclass(frozen=True)
class Parameter:
    """One trainable variable: its name as the framework spells it, kind and shape."""

    name: str
    kind: ParamKind
    shape: tuple[int, ...]
    depth: int  # layer index, 0 = input side

    @property
    def numel(self) -> int:
        """Number of elements."""
        return math.prod(self.shape)

    @property
    def fan_in(self) -> int:
        """Inputs per output unit (He initialisation scale)."""
        return max(1, math.prod(self.shape[:-1])) if self.kind == "kernel" else 1


def keras_cnn() -> tuple[Parameter, ...]:
    """A VGG-style Keras CNN: 12 conv + batch-norm blocks and 8 dense layers (64 variables)."""
    params: list[Parameter] = []
    channels_in = 3
    for block in range(12):
        channels = (32, 64, 128, 256)[block // 3]
        suffix = f"_{block}" if block else ""
        params += [
            Parameter(f"conv2d{suffix}/kernel", "kernel", (3, 3, channels_in, channels), block),
            Parameter(f"conv2d{suffix}/bias", "bias", (channels,), block),
            Parameter(f"batch_normalization{suffix}/gamma", "gamma", (channels,), block),
            Parameter(f"batch_normalization{suffix}/beta", "beta", (channels,), block),
        ]
        channels_in = channels
    units_in = channels_in * 4
    for layer, units in enumerate((512, 512, 256, 256, 128, 128, 64, 10)):
        suffix = f"_{layer}" if layer else ""
        depth = 12 + layer
        params += [
            Parameter(f"dense{suffix}/kernel", "kernel", (units_in, units), depth),
            Parameter(f"dense{suffix}/bias", "bias", (units,), depth),
        ]
        units_in = units
    return tuple(params)


def _torch_conv(name: str, c_in: int, c_out: int, size: int, depth: int) -> Parameter:
    return Parameter(f"{name}.weight", "kernel", (c_out, c_in, size, size), depth)


def _torch_bn(name: str, channels: int, depth: int) -> list[Parameter]:
    return [
        Parameter(f"{name}.weight", "gamma", (channels,), depth),
        Parameter(f"{name}.bias", "beta", (channels,), depth),
    ]


def torch_resnet18() -> tuple[Parameter, ...]:
    """torchvision's ResNet-18 parameter names and shapes (62 parameters, 11.7 M elements)."""
    params = [_torch_conv("conv1", 3, 64, 7, 0), *_torch_bn("bn1", 64, 0)]
    channels_in, depth = 64, 1
    for stage, channels in enumerate((64, 128, 256, 512), start=1):
        for block in range(2):
            prefix = f"layer{stage}.{block}"
            c_in = channels_in if block == 0 else channels
            params += [_torch_conv(f"{prefix}.conv1", c_in, channels, 3, depth)]
            params += _torch_bn(f"{prefix}.bn1", channels, depth)
            params += [_torch_conv(f"{prefix}.conv2", channels, channels, 3, depth + 1)]
            params += _torch_bn(f"{prefix}.bn2", channels, depth + 1)
            if block == 0 and stage > 1:
                params += [_torch_conv(f"{prefix}.downsample.0", c_in, channels, 1, depth)]
                params += _torch_bn(f"{prefix}.downsample.1", channels, depth)
            depth += 2
        channels_in = channels
    params += [
        Parameter("fc.weight", "kernel", (512, 1000), depth),
        Parameter("fc.bias", "bias", (1000,), depth),
    ]
    return tuple(params)


@dataclass(frozen=True)
class StepValues:
    """Samples of every parameter's weights and gradients at one step, shape ``(P, samples)``.

    ``valid`` masks the samples of small parameters (fewer elements than ``samples``);
    ``weight`` is how many elements each valid sample stands for (``numel / valid samples``).
    """

    weights: np.ndarray
    gradients: np.ndarray
    valid: np.ndarray
    weight: np.ndarray


class ValueModel:
    """Evolves all parameters' values step by step (vectorised, deterministic for a seed)."""

    def __init__(self, params: tuple[Parameter, ...], samples: int, seed: int) -> None:
        self.params = params
        self.rng = np.random.default_rng(seed)
        count = len(params)
        per_row = np.minimum([p.numel for p in params], samples)
        self.valid = np.arange(samples)[None, :] < per_row[:, None]
        self.weight = np.array([p.numel for p in params], dtype=np.float64) / per_row
        self.standardised = self.rng.standard_normal((count, samples))
        kinds = [p.kind for p in params]
        fan_in = np.array([p.fan_in for p in params], dtype=np.float64)
        he_scale = np.sqrt(2.0 / fan_in)
        self.initial_scale = np.select(
            [np.array([k == "kernel" for k in kinds]), np.array([k == "gamma" for k in kinds])],
            [he_scale, 0.02],
            0.005,
        )
        self.final_scale = self.initial_scale * self.rng.uniform(1.1, 1.6, count)
        self.centre = np.array([1.0 if k == "gamma" else 0.0 for k in kinds])
        self.centre_drift = self.rng.normal(0.0, 0.02, count) * (self.centre == 0.0)
        depth = np.array([p.depth for p in params], dtype=np.float64)
        depth_factor = 0.3 + 0.7 * depth / max(1.0, depth.max())
        self.gradient_scale = self.initial_scale * 0.05 * depth_factor
        self.gradient_floor = self.rng.uniform(0.1, 0.3, count)

    def step(self, step: int) -> StepValues:
        """Advance the weights by one step and draw this step's gradients."""
        count, samples = self.standardised.shape
        walk = WEIGHT_WALK
        noise = self.rng.standard_normal((count, samples))
        self.standardised *= math.sqrt(1.0 - walk * walk)
        self.standardised += walk * noise
        redraw = np.less(self.rng.random(count), REDRAW_PROBABILITY)
        if redraw.any():
            self.standardised[redraw] = self.rng.standard_normal((int(redraw.sum()), samples))
        settle = 1.0 - math.exp(-step / WEIGHT_TIME_CONSTANT)
        scale = self.initial_scale + (self.final_scale - self.initial_scale) * settle
        centre = self.centre + self.centre_drift * settle
        weights = self.standardised * scale[:, None] + centre[:, None]
        decay = math.exp(-step / GRADIENT_TIME_CONSTANT)
        jitter = self.rng.lognormal(0.0, 0.25, count)
        gradient_scale = self.gradient_scale * (
            self.gradient_floor + (1 - self.gradient_floor) * decay
        )
        gradients = (
            self.rng.laplace(0.0, 1.0, (count, samples)) * (gradient_scale * jitter)[:, None]
        )
        return StepValues(weights, gradients, self.valid, self.weight)

    def loss(self, step: int) -> float:
        """A training loss that decays with noise."""
        decay = math.exp(-step / GRADIENT_TIME_CONSTANT)
        return float(0.15 + 2.2 * decay) * float(self.rng.lognormal(0.0, 0.05))
